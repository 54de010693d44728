"""The environment through each backend the project has (in-process store, HTTP service, Ray actors), for the
tests that play the same episode on every one and compare the answers; its fixtures reach every test module
(tests/conftest.py names this module a plugin)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
import ray

from seal.env.client import EnvClient, HttpEnvClient, InProcessEnvClient
from seal.env.ray_actors import RayEnvClient, start_env_actors
from seal.env.store import EpisodeStore, StoreSettings
from tests.support.service_thread import service_in_thread

BACKENDS = ("inprocess", "http", "ray")


@pytest.fixture(scope="module")
def store_settings() -> StoreSettings:
    """The settings of `service_url`'s and `env_actors`' stores (a module may define its own)."""
    return StoreSettings()


@pytest.fixture(scope="module")
def service_url(store_settings: StoreSettings) -> Iterator[str]:
    """The service in a thread of this process, its log at error level (a module may define its own)."""
    with service_in_thread(EpisodeStore(store_settings), log_level="error") as url:
        yield url


@pytest.fixture(scope="module")
def env_actors(transfer_queue: None, store_settings: StoreSettings) -> Iterator[None]:
    """One environment actor on the session's local Ray, stopped with its fleet after the module."""
    placement = start_env_actors(store_settings, per_node=1)
    yield
    ray.kill(placement.fleet, no_restart=True)


@asynccontextmanager
async def backend_client(request: pytest.FixtureRequest, store: EpisodeStore) -> AsyncIterator[EnvClient]:
    """The client of the backend the test's parameter names: `store` in process, or the module's
    `service_url` / `env_actors` fixture's environment."""
    if request.param == "inprocess":
        yield InProcessEnvClient(store)
    elif request.param == "http":
        async with HttpEnvClient(request.getfixturevalue("service_url")) as http_client:
            yield http_client
    else:
        request.getfixturevalue("env_actors")
        yield RayEnvClient(timeout=30)
