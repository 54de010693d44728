"""Scheduling of episode work on the service's event loop: cheap calls first.

Episode work is CPU-bound and runs on the event loop itself; a worker thread measured worse,
because under the GIL the loop then waits for the worker to hand the interpreter back. Creating
and finishing an episode cost milliseconds (tool instances; the official checker), a step tens of
microseconds. Served first come first served, a step queues behind every create and finish that
arrived before it, and at 32 concurrent sessions its p99 latency was ~65 ms. `HeavyLane` runs the
expensive calls one at a time and lets the loop serve what has arrived before each of them, so a
step waits for at most one expensive call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

YIELDS = 3
"""Loop iterations granted before an expensive call: read a socket, start the request's task, run it."""


class HeavyLane:
    """One expensive call at a time, each after the loop has served the requests already waiting."""

    def __init__(self) -> None:
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def _lock(self) -> asyncio.Lock:
        """A lock of the running loop (an app can be driven by several loops, e.g. in tests)."""
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            for stale in [other for other in self._locks if other.is_closed()]:
                del self._locks[stale]
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def run(self, function: Callable[..., T], *args: object) -> T:
        async with self._lock():
            for _ in range(YIELDS):
                await asyncio.sleep(0)
            return function(*args)
