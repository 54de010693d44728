"""Stop a run whose actors Ray's memory monitor killed, instead of waiting on them for ever.

When a node's memory passes Ray's line (`RAY_memory_usage_threshold`), Ray kills workers; verl 0.9.1 then
waits on the dead ones without a timeout (on one H200 the 7B LoRA run sat for minutes at 0% GPU until it was
stopped by hand). The launch watches the actor table Ray's GCS keeps: an actor of the run that died with an
out-of-memory cause ends the launch with one line (`RayMemoryKill`, exit 1), through the same unwinding as
Ctrl-C, so the environment service is stopped and Ray with it. Other deaths are left to verl and SEAL
(environment actors are replaced: `seal/env/ray_actors.py`).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

POLL_SECONDS = 10.0
"""How often the actor table is read: a killed run is stopped within this, for one GCS call each time."""


class RayMemoryKill(RuntimeError):
    """Ray's memory monitor killed actors of the run; the message says which and what to do."""


@dataclass(frozen=True)
class KilledActor:
    class_name: str
    message: str


def memory_killed(dead_actors: dict[str, dict[str, Any]]) -> list[KilledActor]:
    """The actors of a Ray actor table (`ray._private.state.actors`) whose death cause is out of memory."""
    killed = []
    for info in dead_actors.values():
        cause = info.get("DeathCause")
        if cause is not None and cause.WhichOneof("context") == "oom_context":
            name = str(info.get("ActorClassName") or "?")
            killed.append(KilledActor(name, cause.oom_context.error_message))
    return killed


def dead_actors_of_this_job() -> dict[str, dict[str, Any]]:
    """The DEAD actors of the driver's job, from the GCS (no dashboard needed)."""
    import ray
    from ray._private import state

    job = ray.JobID.from_hex(ray.get_runtime_context().get_job_id())
    return state.actors(job_id=job, actor_state_name="DEAD")


def describe(killed: list[KilledActor]) -> str:
    names = ", ".join(sorted({actor.class_name for actor in killed}))
    first = " ".join(killed[0].message.split())[:200]
    return (
        f"Ray killed {len(killed)} actor(s) of the run for host memory ({names}): the run cannot go on and "
        f"was stopped. Ray said: {first}. Plan the host memory with benchmarks/memory_plan.py "
        "(docs/guides/gpu.md, 'What fits where')"
    )


@contextmanager
def stop_on_memory_kills(
    table: Callable[[], dict[str, dict[str, Any]]] = dead_actors_of_this_job,
    ready: Callable[[], bool] | None = None,
    poll_seconds: float = POLL_SECONDS,
) -> Iterator[None]:
    """Run the body (verl's `run_ppo`, which starts Ray) while a thread reads `table` every `poll_seconds`
    once `ready` (Ray is up); the first out-of-memory death interrupts the main thread with SIGINT, and the
    body's KeyboardInterrupt becomes `RayMemoryKill`. Enter it in the main thread: SIGINT raises
    KeyboardInterrupt inside it even where the launch inherited it ignored (a shell's background job)."""
    if ready is None:
        import ray

        ready = ray.is_initialized
    found: list[KilledActor] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(poll_seconds):
            if not ready():
                continue
            try:
                killed = memory_killed(table())
            except Exception:  # a GCS busy or shutting down: read again at the next poll
                continue
            if killed:
                found.extend(killed)
                os.kill(os.getpid(), signal.SIGINT)
                return

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = threading.Thread(target=watch, name="ray-memory-kills", daemon=True)
    watcher.start()
    try:
        yield
    except KeyboardInterrupt:
        if found:
            raise RayMemoryKill(describe(found)) from None
        raise
    finally:
        done.set()
        watcher.join(timeout=poll_seconds + 5)
        signal.signal(signal.SIGINT, previous)
