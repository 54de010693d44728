"""A deadline on the tool calls whose cost grows with a number the model writes, enforced by preemption.

bfcl-eval's MathAPI computes with the model's numbers as they come: `logarithm(precision=250000)` sets
mpmath's precision to it, `square_root(precision=10**7)` the decimal context's, `power(3, 10**8)` builds an
integer of 48 million digits, each one C-level operation no budget checked before it can stop. MathAPI holds
no state (bfcl-eval's `STATELESS_CLASSES`), so its methods are replaced, once per process, by ones that run
the call in a worker process (seal/bfcl/call_worker.py) and kill it, and start another, once the call has
run `max_call_s` seconds: the call is stopped (`CallStopped`) and there is nothing to roll back. Every
path goes through them alike: an episode's executor, bfcl-eval's checker at finish and the ground truth.
The waiting thread releases the interpreter, and the worker's CPU time for the call (the deadline, for a
stopped one) is charged to it (`worker_seconds`), so the tool budget counts what the call cost. A result
too large to show comes back as the tool's own error. The other classes' calls run in-process: their cost
is bounded by the tool budget's caps on the state and the action (seal/env/budget.py).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import selectors
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api import MathAPI

from seal.bfcl.call_worker import HEADER, write_frame

DEFAULT_CALL_S = 1.0
REMEMBERED_ANSWERS = 4096
REMEMBERED_BYTES = 2048
"""MathAPI is pure: an answer (call and value, pickled, at most this many bytes) is remembered, the last
`REMEMBERED_ANSWERS` of them (at most 8 MiB), so that a finish's four runs of each call (the model's and
the ground truth's, by BFCL's checker and by the turn checks) cost no round trip to a worker."""
START_S = 60.0
"""How long a worker may take to load (an interpreter and bfcl-eval's MathAPI: ~40 ms when idle) before its
call is refused; the load is the service's cost, never charged to the call."""
OUT_OF_PROCESS_CLASS = MathAPI.__name__
_PATCHED = "_seal_deadline"
_LOCAL = threading.local()


class CallStopped(Exception):
    """The call ran past its deadline (or its worker died) and was stopped; it changed nothing."""


@contextlib.contextmanager
def call_deadline(seconds: float) -> Iterator[None]:
    """Calls this thread makes inside the block are stopped after `seconds`."""
    previous = getattr(_LOCAL, "deadline", DEFAULT_CALL_S)
    _LOCAL.deadline = seconds
    try:
        yield
    finally:
        _LOCAL.deadline = previous


def worker_seconds() -> float:
    """Wall time this thread's calls have spent in workers (added to its CPU clock by the budget)."""
    return getattr(_LOCAL, "worker_s", 0.0)


class _Worker:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "seal.bfcl.call_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self.process.stdout is not None
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout.fileno(), selectors.EVENT_READ)
        self.ready = False
        self.seconds = 0.0
        """What its last call cost: the worker's CPU time for it, or, for a stopped call, the wall time it
        was given (a CPU clock, unlike the wall, does not grow with the host's load)."""

    def call(
        self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float
    ) -> tuple[str, Any]:
        """`("value", value)` or `("raised", exception)`; `CallStopped` past `timeout` counted from the call
        (the worker's load is not) (then this worker is dead)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if not self.ready:
            self.seconds = 0.0
            self._frame(time.monotonic() + START_S, "the call's worker did not start; the call was not run")
            self.ready = True
        started = time.monotonic()
        try:
            write_frame(self.process.stdin, (method, args, kwargs))
            kind, value, self.seconds = self._frame(
                started + timeout, f"the call took longer than {_limit():g} s and was stopped"
            )
        except OSError:
            self.stop()
            raise CallStopped("the call's worker had stopped; the call was not run") from None
        except CallStopped:
            self.seconds = time.monotonic() - started
            raise
        return kind, value

    def _frame(self, deadline: float, late: str) -> Any:
        """The worker's next answer, read by `deadline`; `CallStopped(late)` past it."""
        header = self._read(HEADER.size, deadline, late)
        return pickle.loads(self._read(HEADER.unpack(header)[0], deadline, late))

    def _read(self, size: int, deadline: float, late: str) -> bytes:
        fd = self.process.stdout.fileno()  # type: ignore[union-attr]
        chunks: list[bytes] = []
        while size > 0:
            left = deadline - time.monotonic()
            if left <= 0 or not self.selector.select(left):
                self.stop()
                raise CallStopped(late)
            chunk = os.read(fd, min(size, 1 << 20))
            if not chunk:
                self.stop()
                raise CallStopped("the call used more memory than a call may and was stopped")
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def stop(self) -> None:
        self.selector.close()
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def _limit() -> float:
    return getattr(_LOCAL, "deadline", DEFAULT_CALL_S)


class _Pool:
    """Idle workers, started ahead (`start_workers`) or on demand, one per thread calling at once; a stopped
    one is replaced. A forked child starts its own (its parent's pipes are not its to use)."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._answers: OrderedDict[bytes, bytes] = OrderedDict()

    def _own_idle(self) -> list[_Worker]:
        """This process's idle workers (called under the lock)."""
        if self._pid != os.getpid():
            self._idle, self._pid = [], os.getpid()
        return self._idle

    def start(self, count: int) -> None:
        """Start idle workers until `count` are idle; they load at once, side by side."""
        with self._lock:
            idle = self._own_idle()
            idle.extend(_Worker() for _ in range(count - len(idle)))

    def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The method's value (or what it raised): a remembered answer, else a worker's."""
        key = pickle.dumps((method, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
        if answer is None:
            answer = pickle.dumps(self._ask(method, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)
            if len(key) + len(answer) <= REMEMBERED_BYTES:
                with self._lock:
                    self._answers[key] = answer
                    while len(self._answers) > REMEMBERED_ANSWERS:
                        self._answers.popitem(last=False)
        kind, value = pickle.loads(answer)
        if kind == "raised":
            raise value
        return value

    def _ask(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
        with self._lock:
            idle = self._own_idle()
            worker = idle.pop() if idle else None
        if worker is None:
            worker = _Worker()
        stopped = False
        try:
            return worker.call(method, args, kwargs, _limit())
        except CallStopped:
            stopped = True
            raise
        finally:
            _LOCAL.worker_s = worker_seconds() + worker.seconds
            if not stopped:
                with self._lock:
                    self._idle.append(worker)


_POOL = _Pool()


def start_workers(count: int) -> None:
    """Have `count` workers ready before the first calls, so that none waits for one to start (~40 ms of
    an interpreter's start and imports each): a service starts as many as threads may call at once."""
    _POOL.start(count)


WORKER_METHODS = frozenset(
    name for name, value in vars(MathAPI).items() if callable(value) and name[0] != "_"
)
"""The methods whose calls run in the workers."""


def may_call_a_worker(action: str) -> bool:
    """Whether a model's reply could call a method that runs in a worker: it names one, or it writes a
    `\\u` escape, which could spell one. A reply that does neither runs no worker call, so its step needs
    no thread that may wait (most steps of a task with MathAPI: a turn's other calls, "Done.")."""
    return "\\u" in action or any(name in action for name in WORKER_METHODS)


def _sandboxed(name: str) -> Any:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _POOL.call(name, args, kwargs)

    return functools.update_wrapper(method, getattr(MathAPI, name))


def install() -> None:
    """Route every public MathAPI method through the workers (idempotent, once per process)."""
    if getattr(MathAPI, _PATCHED, False):
        return
    for name in WORKER_METHODS:
        setattr(MathAPI, name, _sandboxed(name))
    setattr(MathAPI, _PATCHED, True)
