"""The worker process that runs the stateless tool calls (seal/bfcl/call_deadline.py) for one service.

Once loaded it says `("ready", None, 0.0)`; then it reads `(method, args, kwargs)` frames from stdin and
answers `("value", value, cpu_s)` or `("raised", exc, cpu_s)` frames on stdout (`cpu_s`: the call's CPU
time), each an 8-byte length and a pickle. Only the parent that started it writes to it. A value whose
rendering would be too large to show (an integer past Python's 4,300 digits, more characters than a result
may have) comes back as the tool's own error, so neither process ever renders it.
"""

from __future__ import annotations

import pickle
import resource
import struct
import sys
import time
from typing import Any, BinaryIO

from bfcl_eval.eval_checker.multi_turn_eval.func_source_code.math_api import MathAPI

HEADER = struct.Struct("<Q")
MEMORY_BYTES = 2 << 30
"""Address space the worker may use; past it a call raises MemoryError instead of swapping the host."""
MAX_RESULT_CHARS = 131_072
"""Characters a result may have when rendered; more is the tool's error (the observation's default room)."""


def read_frame(stream: BinaryIO) -> Any:
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        raise EOFError
    return pickle.loads(stream.read(HEADER.unpack(header)[0]))


def write_frame(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def too_large(value: Any) -> str | None:
    """Why `value` cannot be shown, or None (str() refuses an integer past the digit limit before making
    any digit)."""
    try:
        chars = len(str(value))
    except ValueError:
        return f"the result has more than the {sys.get_int_max_str_digits():,} digits a number may show"
    if chars > MAX_RESULT_CHARS:
        return f"the result has {chars:,} characters; at most {MAX_RESULT_CHARS:,} can be shown"
    return None


def run(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any]:
    try:
        value = getattr(MathAPI(), method)(*args, **kwargs)
    except Exception as exc:
        return "raised", exc
    reason = too_large(value)
    return ("value", value) if reason is None else ("value", {"error": reason})


def timed(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any, float]:
    """`run`'s answer and the CPU time it took (what the episode's budget is charged)."""
    started = time.process_time()
    kind, value = run(method, args, kwargs)
    return kind, value, time.process_time() - started


def main() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    write_frame(stdout, ("ready", None, 0.0))
    while True:
        try:
            method, args, kwargs = read_frame(stdin)
        except EOFError:
            return
        write_frame(stdout, timed(method, args, kwargs))


if __name__ == "__main__":
    main()
