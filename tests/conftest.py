"""Fixtures that several test modules share, set up once per session (once in each pytest-xdist worker)
because each takes seconds, and the order the tests run in: the ones on a local Ray first, on one worker,
then the modules with a long shared set-up, then the rest (`run_order`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.support import ray_session
from tests.support.ray_session import LOCAL_RAY
from tests.support.yaml_once import parsed_once

# service_url, env_actors and store_settings: the backends' shared fixtures
pytest_plugins = ("tests.support.backends",)

HEAVY_SETUP = "heavy_setup"
"""The marker of a module whose tests share a set-up that takes many seconds (see `run_order`)."""


@pytest.fixture(scope="session", autouse=True)
def yaml_parsed_once() -> Iterator[None]:
    """Every Hydra composition of the session parses each YAML text once (tests/support/yaml_once.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OmegaConf, "load", staticmethod(parsed_once(OmegaConf.load)))
        yield


@pytest.fixture(scope="module")
def transfer_queue() -> None:
    """A local Ray with TransferQueue (one SimpleStorage unit), as verl's V1 trainer starts them; starting
    Ray takes a quarter of a minute on two cores, so the first module that needs it starts it and the next
    ones use it, until a test that does not need it comes next (`pytest_runtest_teardown` below)."""
    ray_session.start()


def run_order(item: pytest.Item) -> int:
    """0 for the `local_ray` tests: they run first, one after another, so that with `--dist worksteal` the
    worker that takes the head of the collection runs them all and starts one Ray for them (after playing
    ray.cluster_utils' nodes), not each worker its own. 1 for a `heavy_setup` module's tests: run early,
    where work stealing (it takes the tail of a worker's queue) never splits the module between workers,
    each of which would build its set-up. 2 for the rest, in collection order."""
    if item.get_closest_marker(LOCAL_RAY) is not None:
        return 0
    return 1 if item.get_closest_marker(HEAVY_SETUP) is not None else 2


@pytest.hookimpl(trylast=True)  # after pytest's own reordering and deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test of the session's Ray is a `local_ray` test too; then the tests in `run_order`."""
    for item in items:
        if "transfer_queue" in item.fixturenames and item.get_closest_marker(LOCAL_RAY) is None:
            item.add_marker(LOCAL_RAY)
    items.sort(key=run_order)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures are torn down
def pytest_runtest_teardown(nextitem: pytest.Item | None) -> None:
    """Stop the session's Ray when the next test is not a `local_ray` one, rather than let it idle (a tenth
    of a core) to the end of the run; a later `local_ray` module would start it again."""
    if nextitem is None or nextitem.get_closest_marker(LOCAL_RAY) is None:
        ray_session.stop()


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A loopback port where every connection is refused for the whole test: bound, never listened on, and
    held, so no other process (a server of a test running beside this one) can take it. A port that was
    merely free when asked for can be taken before the test connects, and then something answers."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.fixture(scope="session")
def released_backbones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three backbones' `--weights none` folders, built once per test run and shared by the xdist workers
    (the tokenizer conversion takes seconds): name -> folder."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    from tests.support.backbone_folders import (
        released_folders,  # imports transformers: only for the tests that ask
    )

    return released_folders(shared / "backbones")
