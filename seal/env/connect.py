"""One way to reach the environment, whichever backend serves it: an `EnvClient` on the HTTP service, on an
episode store in this process, or on the environment actors of a Ray cluster.

`EnvSettings` says which; the agent loop (`seal.rollout`'s env settings), the trainer's Evolve and
`seal eval --env-backend` all go through here, so a backend is chosen in one place and every caller plays the
same episodes on it:
- `shared_client`: one client per process and settings, for rollout workers (an agent loop is built per
  trajectory; pools must outlive it). With `ray`, the actors are the trainer's (it places them).
- `put_profile`: Evolve from synchronous code (the trainer's step) on the run's environment.
- `open_environment`: a client for a command-line tool that lives as long as its `async with` block; with
  `ray` it places its own actors (starting a local Ray when none is up) and removes them after.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from seal.env.client import EnvClient, HttpEnvClient, InProcessEnvClient
from seal.env.store import EpisodeStore, StoreSettings

T = TypeVar("T")

ENV_BACKENDS = ("http", "ray", "inprocess")
DEFAULT_URL = "http://127.0.0.1:8082"
"""Where `seal serve` listens by default."""


@dataclass(frozen=True)
class EnvSettings:
    """How to reach the environment: `backend` http (the service at `url`), inprocess (a store in this
    process) or ray (environment actors, `actors_per_node` on every node); `store` is what an in-process
    store or each actor holds (the service holds its own)."""

    backend: str = "http"
    url: str = DEFAULT_URL
    timeout_s: float = 60.0
    """Bound on one request, retries included."""
    retries: int = 3
    """Retries of a request that could not reach the service."""
    backoff_s: float = 0.5
    """First retry delay; it doubles with every further retry."""
    actors_per_node: int = 1
    store: StoreSettings = field(default_factory=StoreSettings)

    def __post_init__(self) -> None:
        if self.backend not in ENV_BACKENDS:
            raise ValueError(f"env backend must be one of {', '.join(ENV_BACKENDS)}, not {self.backend!r}")

    def client(self) -> EnvClient:
        """A new client of this environment (with `ray`, on actors that must already be placed)."""
        if self.backend == "inprocess":
            return InProcessEnvClient(EpisodeStore(self.store))
        if self.backend == "ray":
            from seal.env.ray_actors import RayEnvClient

            return RayEnvClient(timeout=self.timeout_s)
        return HttpEnvClient(self.url, timeout=self.timeout_s, retries=self.retries, backoff=self.backoff_s)


_SHARED: dict[EnvSettings, EnvClient] = {}


def shared_client(settings: EnvSettings) -> EnvClient:
    """This process's client of `settings`' environment, made on first use."""
    if settings not in _SHARED:
        _SHARED[settings] = settings.client()
    return _SHARED[settings]


async def close_shared_clients() -> None:
    """Close the running event loop's connections of the shared clients (for tools and tests that end
    their loop; a rollout worker keeps its clients for its lifetime)."""
    for client in _SHARED.values():
        if isinstance(client, HttpEnvClient):
            await client.aclose()


def put_profile(settings: EnvSettings, profile: dict[str, Any], version: int | None = None) -> dict[str, Any]:
    """Evolve(Ω, C_t) on the environment, from synchronous code: the Ω it now serves (with `ray`, the one
    every actor serves)."""
    return _on_environment(settings, lambda client: client.put_profile(profile, version))


def put_interface(settings: EnvSettings, omega: dict[str, Any]) -> dict[str, Any]:
    """The environment serves exactly `omega` (a resumed run's Ω), from synchronous code: the Ω it now
    serves (with `ray`, the one every actor serves)."""
    return _on_environment(settings, lambda client: client.put_interface(omega))


def _on_environment(settings: EnvSettings, call: Callable[[EnvClient], Awaitable[T]]) -> T:
    async def send() -> T:
        client = settings.client()
        try:
            return await call(client)
        finally:
            if isinstance(client, HttpEnvClient):
                await client.aclose()

    return asyncio.run(send())


@contextlib.asynccontextmanager
async def open_environment(settings: EnvSettings) -> AsyncIterator[EnvClient]:
    """A client for the duration of the block. `http`: the service at `settings.url` (it must be running);
    `inprocess`: a new store; `ray`: actors placed for this block on every node of the running Ray cluster,
    or of a local one started (and stopped) for it."""
    if settings.backend == "ray":
        from seal.env.ray_actors import local_fleet

        with local_fleet(settings.store, settings.actors_per_node, settings.timeout_s) as client:
            yield client
        return
    client = settings.client()
    try:
        yield client
    finally:
        if isinstance(client, HttpEnvClient):
            await client.aclose()
