"""What one episode's tool calls may cost the environment: the budget every backend enforces alike.

Model text is untrusted, and ordinary, accepted BFCL calls can amplify it: bfcl-eval's `cp` copies a
directory's contents shallowly, so a few rounds of `cp`/`mv` build a file system of exponentially many paths,
and a message of thousands of `ls` or `cat` calls answers megabytes. Going over a budget is the model's
mistake, scored like any rejected call and never an environment error: a message with too many calls is
rejected whole (nothing runs); a call that would grow the file system past its size is rolled back and
rejected (seal/bfcl/state_size.py); a call once the step's or the episode's CPU time or the episode's
output is spent is not run; an output longer than the observation's or the step's room is cut with a marker.
Bounding the state as it is built bounds everything that later walks it (the checker at finish, the
evidence), and bounding the episode's CPU time and output bounds finish, which re-executes its calls.
The defaults sit far above the most any ground-truth episode of the 800 uses (docs/design.md §3.4,
`benchmarks/tool_budget.py` measures it).
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import dataclass
from typing import Any

from seal.bfcl.call_deadline import DEFAULT_CALL_S, start_workers, worker_seconds
from seal.flags import setting

OUT_OF_MEMORY_READING = "the environment ran out of memory reading this message; nothing was run"
OUT_OF_MEMORY_RUNNING = "the environment ran out of memory running this message; the episode ends here"
CUT_MARKER = "\n[... output cut: {shown:,} of its {total:,} characters are shown ({why}) ...]"


@dataclass(frozen=True)
class ToolBudget:
    """Per message, per call and per episode; the same on the in-process, HTTP and Ray backends."""

    max_calls_per_message: int = setting(
        128, "tool calls one message may make; a message with more is rejected whole, nothing run"
    )
    max_observation_chars: int = setting(
        131_072, "characters of one call's output the model is shown; a longer output is cut with a marker"
    )
    max_step_chars: int = setting(
        262_144, "characters of one message's outputs together; outputs past it are cut with a marker"
    )
    max_state_nodes: int = setting(
        4_096, "paths the simulated file system may hold; a call that would pass it is rolled back"
    )
    max_state_chars: int = setting(
        1_048_576,
        "characters of the file system as text (every full path and file content); a call that would pass "
        "it is rolled back",
    )
    max_step_cpu_s: float = setting(
        0.02, "CPU seconds one message's tool calls may use; calls after it is spent are not run"
    )
    max_episode_cpu_s: float = setting(
        0.25,
        "CPU seconds an episode's tool calls may use in all (finish re-executes them); calls after it is "
        "spent are not run",
    )
    max_call_s: float = setting(
        DEFAULT_CALL_S,
        "seconds one call of a tool whose cost grows with the model's numbers (MathAPI) may run, in a worker "
        "process killed at the deadline; the call is then stopped, changes nothing and is rejected "
        "(seal/bfcl/call_deadline.py)",
    )
    max_episode_output_chars: int = setting(
        1_048_576,
        "characters of output an episode's calls may produce in all, before any cut (finish re-renders "
        "them); calls after it is spent are not run",
    )

    max_episode_action_chars: int = setting(
        262_144,
        "characters of its assistant messages an episode keeps; a message past them is still played, but "
        "kept as its length and SHA-256 (its action log then no longer replays it)",
    )

    def __post_init__(self) -> None:
        counts = (
            self.max_episode_action_chars,
            self.max_calls_per_message,
            self.max_observation_chars,
            self.max_step_chars,
            self.max_state_nodes,
            self.max_state_chars,
            self.max_episode_output_chars,
        )
        seconds = (self.max_step_cpu_s, self.max_episode_cpu_s, self.max_call_s)
        if min(counts) < 1 or min(seconds) <= 0:
            raise ValueError("every tool budget must be positive")
        if self.max_observation_chars > self.max_step_chars:
            raise ValueError("max_observation_chars cannot exceed max_step_chars")

    def too_many_calls(self, calls: int) -> str | None:
        """Why a message of `calls` calls is rejected whole, or None."""
        if calls <= self.max_calls_per_message:
            return None
        return (
            f"the message makes {calls:,} tool calls; at most {self.max_calls_per_message} are allowed "
            "per message, so none was run"
        )


EPISODE_BYTES = 2 << 20
"""What an open episode holds besides its kept actions, at most (tool instances, opening messages, evidence;
measured 0.1 to 1.1 MiB for episodes that spent their whole budget: docs/results/measurements.md)."""


def worst_episode_bytes(budget: ToolBudget) -> int:
    """The most memory one open episode may hold: its fixed part and its kept actions at 4 bytes a
    character (Python's widest strings)."""
    return EPISODE_BYTES + 4 * budget.max_episode_action_chars


HEAVY_CPU_S = 0.005
HEAVY_OUTPUT_CHARS = 262_144
"""An episode whose calls have used this much CPU time or output is heavy: its steps and finish may cost up
to the budget's bounds, so the service runs them off its event loop (the ground truth's most: 1.4 ms and
70k characters)."""


_GC = threading.local()


def _count_collection(phase: str, _: dict[str, Any]) -> None:
    """Keep, per thread, the CPU time spent in garbage collection: a collection that happens to run during
    a call walks the whole process's heap, which the call did not cost (nor would it in a replay)."""
    now = time.thread_time()
    if phase == "start":
        _GC.started = now
    elif hasattr(_GC, "started"):
        _GC.spent = getattr(_GC, "spent", 0.0) + now - _GC.started


gc.callbacks.append(_count_collection)


def start_call_workers(threads: int) -> None:
    """Have a call worker ready for each of `threads` that may step at once (seal/bfcl/call_deadline.py),
    so that no call waits for one to load."""
    start_workers(threads)


def call_cpu_clock() -> float:
    """This thread's CPU time, less what its garbage collections took, plus the time its calls ran in
    worker processes (seal/bfcl/call_deadline.py)."""
    return time.thread_time() - getattr(_GC, "spent", 0.0) + worker_seconds()


class BudgetMeter:
    """What an episode has spent of its `ToolBudget`: CPU time and output, per message and in all."""

    def __init__(self, budget: ToolBudget) -> None:
        self.budget = budget
        self.episode_cpu_s = 0.0
        self.episode_output_chars = 0
        self.step_cpu_s = 0.0
        self.step_chars = 0
        self.largest_output = 0

    def start_step(self) -> None:
        self.step_cpu_s = 0.0
        self.step_chars = 0

    def refusal(self) -> str | None:
        """Why the next call may not run (a budget is spent), or None."""
        budget = self.budget
        if self.step_cpu_s >= budget.max_step_cpu_s:
            return f"this message's tool calls used their {budget.max_step_cpu_s:g} s of CPU time"
        if self.episode_cpu_s >= budget.max_episode_cpu_s:
            return f"this episode's tool calls used their {budget.max_episode_cpu_s:g} s of CPU time"
        if self.episode_output_chars >= budget.max_episode_output_chars:
            return (
                f"this episode's tool calls produced their {budget.max_episode_output_chars:,} characters "
                "of output"
            )
        return None

    @property
    def heavy(self) -> bool:
        """The episode's calls have cost enough that its work goes off the service's event loop."""
        return self.episode_cpu_s >= HEAVY_CPU_S or self.episode_output_chars >= HEAVY_OUTPUT_CHARS

    def timer(self) -> float:
        return call_cpu_clock()

    def charge(self, started: float, output_chars: int) -> None:
        """Account for one call that started at `timer()` value `started` and rendered `output_chars`."""
        spent = call_cpu_clock() - started
        self.step_cpu_s += spent
        self.episode_cpu_s += spent
        self.episode_output_chars += output_chars
        self.largest_output = max(self.largest_output, output_chars)

    def shown(self, text: str) -> str:
        """`text` as the model reads it: cut to the observation's room and what is left of the step's."""
        budget = self.budget
        room = min(budget.max_observation_chars, budget.max_step_chars - self.step_chars)
        if len(text) <= room:
            self.step_chars += len(text)
            return text
        why = (
            f"at most {budget.max_observation_chars:,} per output"
            if room == budget.max_observation_chars
            else f"at most {budget.max_step_chars:,} per message"
        )
        kept = text[: max(room, 0)]
        self.step_chars += len(kept)
        return kept + CUT_MARKER.format(shown=len(kept), total=len(text), why=why)
