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

LABEL_MEANINGS: MappingProxyType[str, str] = MappingProxyType(
    {
        PASS: "the turn needed calls; the model's accepted calls passed every re-execution check",
        CORRECT_ABSTENTION: "the ground truth calls nothing in this turn and the model made no accepted call "
        "(reference: a rejected call counts as no call)",
        SPURIOUS_TOOL_CALL: "the ground truth calls nothing in this turn, but the model called a tool "
        "(paper: a rejected attempt counts too)",
        EMPTY_TURN_MODEL_RESPONSE: "the turn needed calls and the model made no accepted call "
        "(none, or only rejected ones)",
        INSTANCE_MISMATCH: "the model's calls touched a different set of API instances than the ground "
        "truth's",
        STATE_MISMATCH: "after the model's calls the API state differs from the ground truth's",
        RESPONSE_MISMATCH: "the state matches, but results the ground truth's calls returned are missing "
        "from the model's",
        INVALID_TOOL_CALL: "an attempted call was rejected: unparseable, no name or arguments, or a tool not "
        "available now",
        ARGUMENT_MISMATCH: "an accepted call breaks its schema: a required parameter missing, an unknown "
        "one, a wrong type or a value outside its enum",
        MISSING_TOOL_CALL: "the turn needed calls and the model made no accepted call, or never reached the "
        "turn",
        RECOVERY_FAILURE: "an accepted call returned an execution error and no later call of the turn ran "
        "without one",
        CHECKER_ERROR: "the checker failed on this turn: says nothing about the model, never weighted",
        GT_ERROR: "the ground truth's own calls failed to run: says nothing about the model, never weighted",
    }
)
"""What each label means, in one line: the viewer's chips and legend, `seal diagnose --help` and the
diagnosis guide (written there by scripts/make_docs_reference.py) all read it from here."""


def taxonomies_of(label: str) -> str:
    """Which taxonomies emit `label`: `reference`, `paper` or `both`."""
    found = [name for name in TAXONOMIES if label in LABELS_OF[name]]
    return "both" if len(found) == len(TAXONOMIES) else found[0]


ALL_LABELS: tuple[str, ...] = tuple(dict.fromkeys(REFERENCE_LABELS + PAPER_LABELS))
"""Every label of either taxonomy, once: the reference taxonomy's order, then the paper's additions."""


def labels_explained() -> str:
    """One line per label, `name (taxonomies): meaning`, for `seal diagnose --help`."""
    return "\n".join(f"  {label} ({taxonomies_of(label)}): {LABEL_MEANINGS[label]}" for label in ALL_LABELS)


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
