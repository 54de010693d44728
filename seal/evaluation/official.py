"""`seal eval --official`: re-score the written action logs on paths independent of the episode.

The episode's reward comes from `Episode` (its turn logic, its `Task`, then the verifier). Here each
action log is replayed by a separate, execution-free reading of docs/design.md §3.3–3.4 (plain text ends a
turn, any problem rejects the whole message, 20 messages in a turn truncate), with tool availability
and ground truth taken from bfcl-eval's own data loaders rather than `seal.bfcl.tasks`. The rebuilt
calls are then judged twice: by `seal.bfcl.verifier.official_verdict`, and by bfcl-eval's
`multi_turn_checker` called directly on the call strings, as its eval runner does. Only call strings
built by `ToolCall` reach the checker, so no model text is evaluated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any

from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

from seal.bfcl import isolation
from seal.bfcl.calls import InvalidCallError, ToolCall
from seal.bfcl.tasks import category_of, get_task
from seal.bfcl.verifier import FORCE_TERMINATED, official_verdict
from seal.protocol import get_protocol
from seal.protocol.base import ParsedAction

Turns = tuple[tuple[tuple[ToolCall, ...], ...], ...]


@dataclass(frozen=True)
class Replayed:
    """Accepted calls as `[turn][message][call]`, and whether every user turn was ended by the model."""

    turns: Turns
    completed: bool


@dataclass(frozen=True)
class BfclTask:
    """One task exactly as bfcl-eval's loaders give it."""

    entry: Mapping[str, Any]
    ground_truth: tuple[tuple[str, ...], ...]


@cache
def _bfcl_category(category: str) -> MappingProxyType[str, BfclTask]:
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    entries = {
        e["id"]: e
        for e in load_dataset_entry(category, include_prereq=False, include_language_specific_hint=False)
    }
    answers = {
        a["id"]: tuple(tuple(turn) for turn in a["ground_truth"]) for a in load_ground_truth_entry(category)
    }
    return MappingProxyType({task_id: BfclTask(entries[task_id], answers[task_id]) for task_id in entries})


def bfcl_task(task_id: str) -> BfclTask:
    return _bfcl_category(category_of(task_id))[task_id]


def _names(docs: Iterable[Mapping[str, Any]]) -> set[str]:
    return {doc["name"] for doc in docs}


def _accepted(parsed: ParsedAction, available: set[str]) -> tuple[ToolCall, ...] | None:
    """The message's calls, or None when strict parsing rejects the whole message."""
    if parsed.errors:
        return None
    calls = []
    for candidate in parsed.calls:
        if not isinstance(candidate.name, str) or candidate.name not in available:
            return None
        try:
            calls.append(ToolCall(candidate.name, candidate.arguments))
        except InvalidCallError:
            return None
    return tuple(calls)


def replay_calls(task: BfclTask, protocol_name: str, actions: Sequence[str]) -> Replayed:
    """Group a log's accepted calls by user turn, revealing miss_func's held-out tools as turns begin."""
    protocol = get_protocol(protocol_name)
    missed = task.entry.get("missed_function", {})
    num_turns = len(task.ground_truth)
    available = _names(task.entry["function"]) | _names(missed.get("0", ()))
    turns: list[list[tuple[ToolCall, ...]]] = [[] for _ in range(num_turns)]
    turn = steps = 0
    for action in actions:
        if turn >= num_turns:
            break
        steps += 1
        parsed = protocol.parse(action)
        if not parsed.calls and not parsed.errors:
            turn, steps = turn + 1, 0
            available |= _names(missed.get(str(turn), ()))
            continue
        calls = _accepted(parsed, available)
        if calls is not None:
            turns[turn].append(calls)
        if steps >= MAXIMUM_STEP_LIMIT:
            break
    return Replayed(tuple(tuple(t) for t in turns), completed=turn >= num_turns)


def checker_reward(task: BfclTask, replayed: Replayed) -> tuple[float, str | None]:
    """bfcl-eval's multi_turn_checker on the call strings; an unfinished log is force-terminated (0)."""
    if not replayed.completed:
        return 0.0, FORCE_TERMINATED
    decoded = [[[call.to_call_string() for call in step] for step in turn] for turn in replayed.turns]
    namespace = isolation.fresh_namespace("official")
    try:
        result = multi_turn_checker(
            decoded,
            [list(t) for t in task.ground_truth],
            dict(task.entry),
            category_of(task.entry["id"]),
            namespace,
        )
    except Exception as exc:
        return 0.0, f"checker raised {type(exc).__name__}: {exc}"
    finally:
        isolation.drop_namespace(namespace)
    return (1.0, None) if result.get("valid") else (0.0, result.get("error_type"))


def verdict_reward(task_id: str, replayed: Replayed) -> tuple[float, str | None]:
    """`seal.bfcl.verifier.official_verdict` on the rebuilt calls."""
    if not replayed.completed:
        return 0.0, FORCE_TERMINATED
    verdict = official_verdict(get_task(task_id), replayed.turns)
    return (1.0 if verdict.valid else 0.0), verdict.error_type


def rescore(action_logs: Iterable[Mapping[str, Any]], rewards: Mapping[str, float]) -> dict[str, Any]:
    """`{"checked": n, "disagreements": [...]}`: one entry per log whose reward differs on either path."""
    checked = 0
    disagreements = []
    for log in action_logs:
        task_id = log["task_id"]
        task = bfcl_task(task_id)
        replayed = replay_calls(task, log["protocol"], log["actions"])
        verdict, verdict_error = verdict_reward(task_id, replayed)
        checker, checker_error = checker_reward(task, replayed)
        checked += 1
        if verdict != rewards[task_id] or checker != rewards[task_id]:
            disagreements.append(
                {
                    "task_id": task_id,
                    "reward": rewards[task_id],
                    "official_verdict": verdict,
                    "multi_turn_checker": checker,
                    "why": verdict_error or checker_error,
                }
            )
    return {"checked": checked, "disagreements": disagreements}
