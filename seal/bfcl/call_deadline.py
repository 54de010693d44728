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
import inspect
import os
import pickle
import re
import selectors
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api import MathAPI

from seal.bfcl.call_worker import HEADER, too_large, write_frame

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


SMALL_INT = 10**15
SMALL_SCALE = 100
SMALL_TEXT = 100
SMALL_LIST = 1_000
SCALES = frozenset({"precision", "exponent", "decimal_places"})
"""A call whose arguments are all small runs here, at once: integers of magnitude at most `SMALL_INT`,
precisions, exponents and decimal places of at most `SMALL_SCALE`, texts (unit names) of at most
`SMALL_TEXT` characters, lists of at most `SMALL_LIST` such numbers; floats take constant time. Under those
bounds every MathAPI method takes microseconds and answers in under 1,600 characters (the ground truth's
calls all fit), so the round trip to a worker, which costs the service more than the call, is saved for the
calls that may be expensive; every other call goes to a worker under the deadline."""


def _small(value: Any, scale: bool = False) -> bool:
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, float):
        return not scale or abs(value) <= SMALL_SCALE
    if isinstance(value, int):
        return abs(value) <= (SMALL_SCALE if scale else SMALL_INT)
    if isinstance(value, str):
        return len(value) <= SMALL_TEXT
    if isinstance(value, list):
        return len(value) <= SMALL_LIST and all(_small(item) for item in value)
    return False


LARGE_NUMBER = re.compile(r"\d{3}|\d[eE][+]?\d|\\u")
"""A number of three digits or more, one in exponent notation, or a `\\u` escape (which could spell any
of them, or a method's name): what a call needs to be sent to a worker (`SMALL_SCALE`, `SMALL_INT`)."""


def may_call_a_worker(action: str) -> bool:
    """Whether a model's reply could send a call to a worker: it names a MathAPI method and writes a number
    too large for the in-process path, or an escape, or is long enough to hold a list of `SMALL_LIST`
    numbers. Such a step may wait up to the deadline, so it runs off the service's loop; any other step's
    calls are all in-process and cheap (a turn's other calls, "Done.", the ground truth's arithmetic). A
    reply this misjudges still has its calls stopped at the deadline: it holds the loop that long at most."""
    if not any(name in action for name in WORKER_METHODS):
        return "\\u" in action
    return len(action) > SMALL_LIST or LARGE_NUMBER.search(action) is not None


def _sandboxed(name: str) -> Any:
    original = getattr(MathAPI, name)
    signature = inspect.signature(original)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
        except TypeError:
            bound = None
        if bound is not None and all(
            _small(value, key in SCALES) for key, value in bound.items() if key != "self"
        ):
            value = original(self, *args, **kwargs)
            reason = too_large(value)
            return value if reason is None else {"error": reason}
        return _POOL.call(name, args, kwargs)

    return functools.update_wrapper(method, original)


def install() -> None:
    """Route every public MathAPI method through the workers (idempotent, once per process)."""
    if getattr(MathAPI, _PATCHED, False):
        return
    for name in WORKER_METHODS:
        setattr(MathAPI, name, _sandboxed(name))
    setattr(MathAPI, _PATCHED, True)
