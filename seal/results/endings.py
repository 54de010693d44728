"""How scored episodes ended besides passing or failing: in an identical-call loop, or at the call limit.

A small model that has lost its way repeats one call until the episode's call budget is spent; the pass rate
alone hides that. Two shares say it, for every `seal eval` run (its summary line and `summary.json`) and for
any report that reads episode lines:

- loops: the episodes whose last `LOOP_CALLS` model replies are one and the same call: the same text (up to
  surrounding whitespace), and a call in the protocol's terms (tool-call markup, not a plain answer such as
  the end of a turn, which an episode of several quiet turns repeats without looping). An episode line
  carries it as `looped`, decided from the replies it sent.
- call limit: the episodes that used all their LLM calls: the driver's call limit cut them (`cut` is
  "calls"), or the environment's own step limit did (BFCL's 20 steps per turn, τ²'s steps: `truncated` with no
  cut of the driver's), whichever came first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from seal.env.replay import parse_action_log
from seal.protocol import get_protocol

LOOP_CALLS = 5
"""Identical calls in a row that make a loop: the last five replies of the episode."""


REPEATED_CHARS = 300
"""How much of a loop's repeated reply an ending keeps: enough for the call's name and arguments."""


def repeated_call(actions: Sequence[str], protocol: str, calls: int = LOOP_CALLS) -> str | None:
    """The call the replies `actions` (in order, written in `protocol`) end by repeating `calls` times,
    stripped; None where they do not end in such a loop."""
    last = actions[-calls:]
    if len(last) < calls or len({action.strip() for action in last}) != 1:
        return None
    return last[-1].strip() if get_protocol(protocol).parse(last[-1]).has_markup else None


def ends_in_loop(actions: Sequence[str], protocol: str, calls: int = LOOP_CALLS) -> bool:
    """Whether the replies `actions` (in order, written in `protocol`) end with `calls` identical calls."""
    return repeated_call(actions, protocol, calls) is not None


def used_all_calls(record: dict[str, Any]) -> bool:
    """Whether the episode line `record` ended at a call limit, the driver's or the environment's."""
    cut = record.get("cut", "none")
    return cut == "calls" or (cut == "none" and bool(record.get("truncated")))


def dump_row_ending(row: dict[str, Any], where: str) -> dict[str, Any]:
    """How the episode of one trainer dump row (a validation or test pass's `{step}.jsonl`) ended:
    `llm_calls`, `call_limit` (`used_all_calls`), `looped` (its `action_log` ends in a loop) and `repeated`
    (the looped call's first `REPEATED_CHARS` characters: what the policy resends), each None where the row
    lacks what it is read from or did not loop. An action log that is not one raises, naming `where`."""
    ending = {"llm_calls": row.get("llm_calls")}
    ending["call_limit"] = used_all_calls(row) if "cut" in row or "truncated" in row else None
    log = row.get("action_log")
    if isinstance(log, str):
        parsed = parse_action_log(json.loads(log), f"{where}: action_log")
        repeated = repeated_call(parsed["actions"], parsed["protocol"])
        ending["looped"] = repeated is not None
        ending["repeated"] = repeated[:REPEATED_CHARS] if repeated is not None else None
    else:
        ending["looped"] = ending["repeated"] = None
    return ending


ENDING_FIELDS = ("llm_calls", "call_limit", "looped")
"""What `dump_row_ending` reads of every episode (`repeated` is there only for a loop)."""


def ending_shares(ends: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """Over episodes' `dump_row_ending` fields: how many, the shares that looped and that used all their
    calls, and the mean replies; None where any episode lacks a field (None, or NaN read back from a CSV):
    a dump written before they were kept."""
    missing = any(
        value is None or (isinstance(value, float) and math.isnan(value))
        for end in ends
        for value in (end.get(field) for field in ENDING_FIELDS)
    )
    if not ends or missing:
        return None
    n = len(ends)
    return {
        "n": float(n),
        "looped": sum(bool(end["looped"]) for end in ends) / n,
        "call_limit": sum(bool(end["call_limit"]) for end in ends) / n,
        "llm_calls": sum(float(end["llm_calls"]) for end in ends) / n,
    }


def endings(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`{"n", "loop_calls", "loops": {"count", "share", "task_ids"}, "call_limit": {...}}` over the scored
    episode lines `records`; a line without `looped` (written before it was recorded) counts as no loop."""
    n = len(records)

    def share(ids: list[str]) -> dict[str, Any]:
        return {"count": len(ids), "share": len(ids) / n if n else 0.0, "task_ids": ids}

    return {
        "n": n,
        "loop_calls": LOOP_CALLS,
        "loops": share([r["task_id"] for r in records if r.get("looped")]),
        "call_limit": share([r["task_id"] for r in records if used_all_calls(r)]),
    }


def endings_line(score: str, summary: dict[str, Any]) -> str:
    """The summary line: the run's score (its pass rate, as `score` words it) beside the loop and call-limit
    shares of `endings`' `summary`."""
    n, loops, limit = summary["n"], summary["loops"], summary["call_limit"]
    return (
        f"{score} · loops {loops['share']:.1%} ({loops['count']} of {n} scored episode(s) end in "
        f"{summary['loop_calls']} identical calls) · call limit {limit['share']:.1%} "
        f"({limit['count']} of {n} used all their LLM calls)"
    )
