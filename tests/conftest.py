"""Fixtures that several test modules share, set up once per session (once in each pytest-xdist worker)
because each takes seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support import ray_session


@pytest.fixture(scope="session")
def transfer_queue() -> Iterator[None]:
    """A local Ray with TransferQueue (one SimpleStorage unit), as verl's V1 trainer starts them; starting
    Ray takes a quarter of a minute on two cores, so the modules that need it share one."""
    ray_session.start()
    try:
        yield
    finally:
        ray_session.stop()
