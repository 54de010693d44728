"""Diagnosis Ψ: one label per ground-truth turn, from the evidence an episode recorded (docs/design.md §4.1).

Every label carries the evidence that decided it (which messages, which call, which check), so a person
reading a report can see why without re-running the episode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from seal.tocf import labels as L
from seal.tocf.evidence import CallEvidence, TurnEvidence

RULE_WORDS: dict[str, str] = {
    "gt_empty_no_call": "the ground truth calls nothing here and the model made no call",
    "gt_empty_with_call": "the ground truth calls nothing here, but the model made a call",
    "gt_error": "the ground truth's own calls failed to run",
    "checker_error": "the checker failed on this turn",
    "no_accepted_call": "the turn needed calls and none of the model's was accepted",
    "check:instance_mismatch": "re-executed: the model's calls touched other API instances "
    "than the ground truth's",
    "check:state_mismatch": "re-executed: the API state after the model's calls differs "
    "from the ground truth's",
    "check:response_mismatch": "re-executed: results of the ground truth's calls are missing "
    "from the model's",
    "checks_passed": "re-executed: instances, state and results all match the ground truth",
    "rejected_attempt": "an attempted call was rejected",
    "schema_violation": "an accepted call breaks its schema",
    "unrecovered_error": "a call errored and no later call of the turn ran without an error",
    "unreached": "the episode ended before the model reached this turn",
}
"""Each rule a label's evidence names (`evidence["rule"]`), in words: what the viewer shows for it."""


@dataclass(frozen=True)
class Label:
    """The diagnosis of one ground-truth turn."""

    turn: int
    label: str
    evidence: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "label": self.label, "evidence": self.evidence}


def _evidence(turn: TurnEvidence, rule: str, **extra: Any) -> dict[str, Any]:
    return {"rule": rule, "messages": list(turn.messages), **extra}


def _calls(calls: Sequence[CallEvidence]) -> list[dict[str, Any]]:
    return [c.to_dict() for c in calls]


def _make(turn: TurnEvidence, label: str, rule: str, **extra: Any) -> Label:
    return Label(turn.turn, label, _evidence(turn, rule, **extra))


def _gt_empty(turn: TurnEvidence, attempted: bool, taxonomy: str) -> Label:
    if not attempted:
        return _make(turn, L.CORRECT_ABSTENTION, "gt_empty_no_call")
    shown = turn.calls if taxonomy == L.PAPER_TAXONOMY else turn.accepted_calls
    return _make(
        turn,
        L.SPURIOUS_TOOL_CALL,
        "gt_empty_with_call",
        calls=_calls(shown),
        model_calls=turn.check.model_calls,
        rejected_messages=turn.rejected_messages,
    )


def _judge_error(turn: TurnEvidence) -> Label | None:
    """The ground truth or the checker failed: the turn says nothing about the model."""
    if turn.check.gt_error is not None:
        return _make(turn, L.GT_ERROR, "gt_error", error=turn.check.gt_error)
    if turn.check.checker_error is not None:
        return _make(turn, L.CHECKER_ERROR, "checker_error", error=turn.check.checker_error)
    return None


def _check_failure(turn: TurnEvidence, label: str) -> Label | None:
    flag = {
        L.INSTANCE_MISMATCH: turn.check.instance_match,
        L.STATE_MISMATCH: turn.check.state_ok,
        L.RESPONSE_MISMATCH: turn.check.response_ok,
    }[label]
    if flag:
        return None
    return _make(turn, label, f"check:{label}", check=turn.check.to_dict())


def _reference(turn: TurnEvidence) -> Label:
    if turn.gt_empty:
        return _gt_empty(turn, turn.has_accepted_call, L.REFERENCE_TAXONOMY)
    excluded = _judge_error(turn)
    if excluded is not None:
        return excluded
    if not turn.has_accepted_call:
        return _make(
            turn,
            L.EMPTY_TURN_MODEL_RESPONSE,
            "no_accepted_call",
            reached=turn.reached,
            rejected_calls=_calls(turn.rejected_calls),
            rejected_messages=turn.rejected_messages,
            check=turn.check.to_dict(),
        )
    for label in (L.INSTANCE_MISMATCH, L.STATE_MISMATCH, L.RESPONSE_MISMATCH):
        failed = _check_failure(turn, label)
        if failed is not None:
            return failed
    return _make(turn, L.PASS, "checks_passed", model_calls=turn.check.model_calls)


def _invalid_tool_call(turn: TurnEvidence) -> Label | None:
    if not turn.has_rejected_attempt:
        return None
    return _make(
        turn,
        L.INVALID_TOOL_CALL,
        "rejected_attempt",
        calls=_calls(turn.rejected_calls),
        rejected_messages=turn.rejected_messages,
        check=turn.check.to_dict(),
    )


def _argument_mismatch(turn: TurnEvidence) -> Label | None:
    violating = [c for c in turn.accepted_calls if c.schema_violations]
    if not violating:
        return None
    return _make(
        turn,
        L.ARGUMENT_MISMATCH,
        "schema_violation",
        call=violating[0].to_dict(),
        calls=_calls(violating),
        check=turn.check.to_dict(),
    )


def _missing_tool_call(turn: TurnEvidence) -> Label | None:
    if turn.has_accepted_call:
        return None
    return _make(
        turn,
        L.MISSING_TOOL_CALL,
        "no_accepted_call",
        rejected_messages=turn.rejected_messages,
        check=turn.check.to_dict(),
    )


def _recovery_failure(turn: TurnEvidence) -> Label | None:
    """An accepted call errored and every accepted call after it errored too (the trailing error run)."""
    accepted = turn.accepted_calls
    tail = len(accepted)
    while tail > 0 and accepted[tail - 1].errored:
        tail -= 1
    unrecovered = accepted[tail:]
    if not unrecovered:
        return None
    return _make(
        turn,
        L.RECOVERY_FAILURE,
        "unrecovered_error",
        call=unrecovered[0].to_dict(),
        calls=_calls(unrecovered),
        check=turn.check.to_dict(),
    )


_PAPER_RULES: dict[str, Callable[[TurnEvidence], Label | None]] = {
    L.INVALID_TOOL_CALL: _invalid_tool_call,
    L.ARGUMENT_MISMATCH: _argument_mismatch,
    L.MISSING_TOOL_CALL: _missing_tool_call,
    L.RECOVERY_FAILURE: _recovery_failure,
    L.INSTANCE_MISMATCH: lambda t: _check_failure(t, L.INSTANCE_MISMATCH),
    L.STATE_MISMATCH: lambda t: _check_failure(t, L.STATE_MISMATCH),
    L.RESPONSE_MISMATCH: lambda t: _check_failure(t, L.RESPONSE_MISMATCH),
}


def _paper(turn: TurnEvidence, priority: tuple[str, ...]) -> Label:
    if not turn.reached:
        return _make(turn, L.MISSING_TOOL_CALL, "unreached", gt_empty=turn.gt_empty)
    if turn.gt_empty:
        return _gt_empty(turn, turn.has_accepted_call or turn.has_rejected_attempt, L.PAPER_TAXONOMY)
    excluded = _judge_error(turn)
    if excluded is not None:
        return excluded
    if turn.has_accepted_call and turn.check.ok:
        return _make(turn, L.PASS, "checks_passed", model_calls=turn.check.model_calls)
    for name in priority:
        label = _PAPER_RULES[name](turn)
        if label is not None:
            return label
    raise AssertionError("a failing turn has at least one accepted-call or check failure")


def diagnose(
    turns: Sequence[TurnEvidence], taxonomy: str = L.DEFAULT_TAXONOMY, priority: Sequence[str] | None = None
) -> list[Label]:
    """Label every ground-truth turn. `priority` orders the failure labels of the paper taxonomy.

    `priority` is validated for both taxonomies (so a bad config fails early) but only the paper
    taxonomy uses it: the reference taxonomy's order is the released checker's, fixed.
    """
    if taxonomy not in L.TAXONOMIES:
        raise ValueError(f"unknown taxonomy {taxonomy!r}; expected one of {list(L.TAXONOMIES)}")
    order = L.DEFAULT_PRIORITY if priority is None else L.validate_priority(priority)
    if taxonomy == L.REFERENCE_TAXONOMY:
        return [_reference(t) for t in turns]
    return [_paper(t, order) for t in turns]


def trajectory_profile(labels: Sequence[Label | str]) -> dict[str, float]:
    """p_j(z): the share of the trajectory's ground-truth turns labelled z (paper Eq. 10)."""
    names = [x.label if isinstance(x, Label) else x for x in labels]
    if not names:
        return {}
    return {name: count / len(names) for name, count in Counter(names).items()}
