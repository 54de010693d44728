"""A driver whose actor Ray's own memory monitor kills while the driver waits elsewhere, as verl's waits on a
dead vLLM server: run as a script, its environment setting Ray's kill line at 1% of the node
(tests/trainer/rl/test_oom_watch.py). Exit 3 and the line when the watch stops it, 0 if the wait ran out."""

from __future__ import annotations

import sys
import time

import ray

from seal.trainer.rl.oom_watch import RayMemoryKill, stop_on_memory_kills


@ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0)
class Busy:
    def spin(self) -> None:
        time.sleep(60)


def main() -> int:
    try:
        with stop_on_memory_kills(poll_seconds=0.5):
            # a Ray of its own, never a neighbour's (another test's cluster on this machine)
            ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
            busy = Busy.remote()
            busy.spin.remote()
            time.sleep(60)
    except RayMemoryKill as stopped:
        print(stopped)
        return 3
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
