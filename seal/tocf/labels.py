"""Turn-level failure labels, the two taxonomies, the default utility weights ρ and the priority orders."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType

PASS = "pass"
CORRECT_ABSTENTION = "correct_abstention"
SPURIOUS_TOOL_CALL = "spurious_tool_call"
EMPTY_TURN_MODEL_RESPONSE = "empty_turn_model_response"
INSTANCE_MISMATCH = "instance_mismatch"
STATE_MISMATCH = "state_mismatch"
RESPONSE_MISMATCH = "response_mismatch"
INVALID_TOOL_CALL = "invalid_tool_call"
ARGUMENT_MISMATCH = "argument_mismatch"
MISSING_TOOL_CALL = "missing_tool_call"
RECOVERY_FAILURE = "recovery_failure"
CHECKER_ERROR = "checker_error"
GT_ERROR = "gt_error"

EXCLUDED: frozenset[str] = frozenset({CHECKER_ERROR, GT_ERROR})
"""Labels that say the judge failed, not the model: counted, but never weighted or used as denominators."""

REFERENCE_LABELS: tuple[str, ...] = (
    PASS,
    CORRECT_ABSTENTION,
    SPURIOUS_TOOL_CALL,
    EMPTY_TURN_MODEL_RESPONSE,
    INSTANCE_MISMATCH,
    STATE_MISMATCH,
    RESPONSE_MISMATCH,
    CHECKER_ERROR,
    GT_ERROR,
)
"""What the released SEAL code's turn-by-turn checker can emit."""

PAPER_LABELS: tuple[str, ...] = (
    PASS,
    CORRECT_ABSTENTION,
    SPURIOUS_TOOL_CALL,
    INVALID_TOOL_CALL,
    ARGUMENT_MISMATCH,
    MISSING_TOOL_CALL,
    RECOVERY_FAILURE,
    INSTANCE_MISMATCH,
    STATE_MISMATCH,
    RESPONSE_MISMATCH,
    CHECKER_ERROR,
    GT_ERROR,
)
"""What the paper's taxonomy (§3.2, Table 5) can emit."""

REFERENCE_TAXONOMY = "reference"
"""The released SEAL code's seven tags."""
PAPER_TAXONOMY = "paper"
"""The paper's §3.2 / Table 5 taxonomy."""
TAXONOMIES: tuple[str, ...] = (REFERENCE_TAXONOMY, PAPER_TAXONOMY)
DEFAULT_TAXONOMY = REFERENCE_TAXONOMY
LABELS_OF: dict[str, tuple[str, ...]] = {REFERENCE_TAXONOMY: REFERENCE_LABELS, PAPER_TAXONOMY: PAPER_LABELS}
"""The labels each taxonomy can emit."""

DEFAULT_PRIORITY: tuple[str, ...] = (
    INVALID_TOOL_CALL,
    ARGUMENT_MISMATCH,
    MISSING_TOOL_CALL,
    RECOVERY_FAILURE,
    INSTANCE_MISMATCH,
    STATE_MISMATCH,
    RESPONSE_MISMATCH,
)
"""Failing reached turns in the paper taxonomy: executable failures outrank verifier-level ones."""

TABLE5_PRIORITY: tuple[str, ...] = (
    INVALID_TOOL_CALL,
    ARGUMENT_MISMATCH,
    INSTANCE_MISMATCH,
    STATE_MISMATCH,
    RECOVERY_FAILURE,
    MISSING_TOOL_CALL,
    RESPONSE_MISMATCH,
)
"""Table 5 read literally; it omits instance_mismatch, which keeps its default place above state_mismatch."""

FAILURE_LABELS: frozenset[str] = frozenset(DEFAULT_PRIORITY)

DEFAULT_RHO: MappingProxyType[str, float] = MappingProxyType(
    {
        SPURIOUS_TOOL_CALL: 2.0,
        CORRECT_ABSTENTION: 1.8,
        EMPTY_TURN_MODEL_RESPONSE: 1.5,
        STATE_MISMATCH: 1.0,
        RESPONSE_MISMATCH: 0.9,
        INSTANCE_MISMATCH: 0.6,
        PASS: 1.0,
        INVALID_TOOL_CALL: 2.0,
        ARGUMENT_MISMATCH: 1.8,
        MISSING_TOOL_CALL: 1.5,
        RECOVERY_FAILURE: 1.2,
    }
)
"""Paper Table 6 plus docs/design.md §4.3's weights for the paper taxonomy's four extra labels."""


def validate_priority(priority: Sequence[str]) -> tuple[str, ...]:
    """Return `priority` as a tuple if it orders exactly the seven failure labels, else raise ValueError."""
    if isinstance(priority, str):
        raise ValueError(f"priority must be a list of labels, not the string {priority!r}")
    order = tuple(priority)
    unknown = [p for p in order if p not in FAILURE_LABELS]
    if unknown:
        raise ValueError(f"unknown label(s) in priority: {unknown}; allowed: {sorted(FAILURE_LABELS)}")
    duplicated = sorted({p for p in order if order.count(p) > 1})
    if duplicated:
        raise ValueError(f"priority lists label(s) more than once: {duplicated}")
    missing = sorted(FAILURE_LABELS.difference(order))
    if missing:
        raise ValueError(f"priority must order all seven failure labels; missing: {missing}")
    return order
