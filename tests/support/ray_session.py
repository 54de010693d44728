"""The session's local Ray with TransferQueue, as verl's V1 trainer starts them: started once for the modules
that need it (tests/conftest.py), stopped and started again around a module that needs a Ray of its own."""

from __future__ import annotations


def start() -> None:
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)  # never a neighbour's
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))


def stop() -> None:
    import ray
    import transfer_queue as tq

    tq.close()
    ray.shutdown()
