"""Fixtures that several test modules share, set up once per session because each takes seconds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def transfer_queue() -> Iterator[None]:
    """A local Ray with TransferQueue (one SimpleStorage unit), as verl's V1 trainer starts them; starting
    Ray takes a quarter of a minute on two cores, so the modules that need it share one."""
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        yield
    finally:
        tq.close()
        ray.shutdown()
