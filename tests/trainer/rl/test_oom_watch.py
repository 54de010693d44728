"""A run whose actors Ray's memory monitor killed ends in one line instead of waiting for ever
(seal/trainer/rl/oom_watch.py): which deaths count, how the blocked main thread is stopped, and the shape of
the actor table a real Ray returns."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from ray.core.generated import common_pb2

from seal.trainer.launch.command import refusal_of
from seal.trainer.rl.oom_watch import (
    RayMemoryKill,
    dead_actors_of_this_job,
    memory_killed,
    stop_on_memory_kills,
)

OOM_MESSAGE = "Task was killed due to the node running low on memory. Memory on the node was 118 GB / 125 GB"


def dead(name: str, cause: common_pb2.ActorDeathCause | None) -> dict:
    return {"ActorClassName": name, "State": "DEAD", **({"DeathCause": cause} if cause is not None else {})}


def oom() -> common_pb2.ActorDeathCause:
    return common_pb2.ActorDeathCause(oom_context=common_pb2.OomContext(error_message=OOM_MESSAGE))


def died(reason: int) -> common_pb2.ActorDeathCause:
    context = common_pb2.ActorDiedErrorContext(reason=reason)
    return common_pb2.ActorDeathCause(actor_died_error_context=context)


TABLE = {
    "a": dead("WorkerDict", oom()),
    "b": dead("EnvActor", died(common_pb2.ActorDiedErrorContext.WORKER_DIED)),
    "c": dead("vLLMHttpServer", died(common_pb2.ActorDiedErrorContext.RAY_KILL)),
    "d": dead("AgentLoopWorker", None),
}


def test_only_deaths_for_memory_count():
    (killed,) = memory_killed(TABLE)
    assert (killed.class_name, killed.message) == ("WorkerDict", OOM_MESSAGE)
    assert memory_killed({k: v for k, v in TABLE.items() if k != "a"}) == []


def test_a_body_blocked_on_dead_actors_is_stopped_with_one_line_naming_them():
    reads = []

    def table() -> dict:
        reads.append(time.monotonic())
        return TABLE if len(reads) >= 3 else {"b": TABLE["b"]}

    started = time.monotonic()
    watching = stop_on_memory_kills(table, ready=lambda: True, poll_seconds=0.05)
    with pytest.raises(RayMemoryKill) as stopped, watching:
        time.sleep(30)  # verl waiting on a dead actor
    assert time.monotonic() - started < 10 and len(reads) == 3
    line = str(stopped.value)
    assert "\n" not in line
    assert line.startswith("Ray killed 1 actor(s) of the run for host memory (WorkerDict)")
    assert "118 GB / 125 GB" in line and "benchmarks/memory_plan.py" in line
    assert refusal_of(stopped.value) == (line, 1)


def test_a_run_without_kills_ends_as_it_would_and_ctrl_c_stays_ctrl_c():
    previous = signal.getsignal(signal.SIGINT)
    with stop_on_memory_kills(lambda: {"b": TABLE["b"]}, ready=lambda: True, poll_seconds=0.01):
        time.sleep(0.1)
    assert not [t for t in threading.enumerate() if t.name == "ray-memory-kills" and t.is_alive()]
    assert signal.getsignal(signal.SIGINT) is previous
    quiet = stop_on_memory_kills(lambda: {}, ready=lambda: True, poll_seconds=0.01)
    with pytest.raises(KeyboardInterrupt), quiet:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


def test_nothing_is_read_before_ray_is_up():
    reads = []
    with stop_on_memory_kills(lambda: reads.append(1) or TABLE, ready=lambda: False, poll_seconds=0.01):
        time.sleep(0.1)
    assert reads == []


@pytest.mark.usefixtures("transfer_queue")
def test_a_real_rays_table_names_a_killed_actor_and_it_is_not_a_memory_kill():
    import ray

    @ray.remote(num_cpus=0)
    class Doomed:
        def pid(self) -> int:
            return os.getpid()

    actor = Doomed.remote()
    os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not any(i["ActorClassName"].endswith("Doomed") for i in dead_actors_of_this_job().values()):
        assert time.monotonic() < deadline, "the killed actor never showed as DEAD"  # others' may be there
        time.sleep(0.2)
    assert memory_killed(dead_actors_of_this_job()) == []


@pytest.mark.usefixtures("transfer_queue")
def test_the_stop_reaches_a_driver_blocked_in_ray_get():
    """run_ppo's driver waits in `ray.get` on the task runner: the interrupt must get it out of there."""
    import ray

    @ray.remote(num_cpus=0)
    def stuck() -> None:
        time.sleep(60)

    started, waiting = time.monotonic(), stuck.remote()
    watching = stop_on_memory_kills(lambda: TABLE, ready=ray.is_initialized, poll_seconds=0.2)
    with pytest.raises(RayMemoryKill), watching:
        ray.get(waiting)
    assert time.monotonic() - started < 15
    ray.cancel(waiting, force=True)


def test_rays_own_memory_monitor_killing_an_actor_stops_the_driver_in_one_line():
    """A fresh Ray whose kill line is 1% of the node kills the busy actor; the driver, asleep, is stopped."""
    script = Path(__file__).parents[2] / "support" / "ray_memory_kill.py"
    low_line = {"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=script.parents[2],
        env={**os.environ, **low_line},
    )
    assert done.returncode == 3, done.stderr[-2000:]
    (line,) = done.stdout.splitlines()
    assert line.startswith("Ray killed 1 actor(s) of the run for host memory (Busy)")
    assert "were killed due to the node running low on memory" in line
    assert time.monotonic() - started < 60
