"""The session's local Ray with TransferQueue, as SEAL's task runner starts them (TransferQueue from another
thread; tests/conftest.py), and the marker of the tests that use a local Ray.

Starting a Ray takes a quarter of a minute of both cores and an idle one keeps a tenth of a core busy, so the
`local_ray` tests run first, on one pytest-xdist worker, and the Ray stops after them."""

from __future__ import annotations

LOCAL_RAY = "local_ray"
"""The marker of the tests that use a local Ray: the session's, or one of their own (ray.cluster_utils)."""

_running = False


def start() -> None:
    """Start the session's Ray, unless it runs already."""
    from concurrent.futures import ThreadPoolExecutor

    import ray
    from omegaconf import OmegaConf

    from seal.trainer.rl.task_runner import start_transfer_queue

    global _running
    if _running:
        return
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)  # never a neighbour's
    config = OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}})
    with ThreadPoolExecutor(max_workers=1) as beside:  # as the task runner does: the tests use it from here
        beside.submit(start_transfer_queue, config).result()
    _running = True


def stop() -> None:
    """Stop the session's Ray, if it runs."""
    global _running
    if not _running:
        return
    import ray
    import transfer_queue as tq

    _running = False
    tq.close()
    ray.shutdown()
