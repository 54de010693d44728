"""Fixtures that several test modules share, set up once per session (once in each pytest-xdist worker)
because each takes seconds."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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
