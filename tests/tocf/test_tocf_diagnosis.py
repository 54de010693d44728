"""Diagnosis Ψ on hand-built evidence mirroring tests/data/diagnosis_cases.jsonl (docs/design.md §4.1)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seal.tocf.diagnosis import Label, diagnose, trajectory_profile
from seal.tocf.evidence import CallEvidence, TurnCheck, TurnEvidence
from seal.tocf.labels import (
    DEFAULT_PRIORITY,
    PAPER_LABELS,
    REFERENCE_LABELS,
    TABLE5_PRIORITY,
)

ERR_MISSING = "Error during execution: TicketAPI.resolve_ticket() missing 1 required positional argument"


def call(
    message: int,
    name: str,
    *,
    accepted: bool = True,
    error: str | None = None,
    violations: tuple[str, ...] = (),
    reason: str | None = None,
) -> CallEvidence:
    return CallEvidence(message, name, accepted, reason, error, violations)


def turn(
    index: int,
    *,
    gt_empty: bool = False,
    reached: bool | None = None,
    messages: tuple[int, ...] = (),
    calls: tuple[CallEvidence, ...] = (),
    rejected_messages: int = 0,
    model_calls: int | None = None,
    **check: object,
) -> TurnEvidence:
    """A turn whose verifier count defaults to the accepted calls, reached iff it has messages."""
    executed = sum(c.accepted for c in calls) if model_calls is None else model_calls
    return TurnEvidence(
        turn=index,
        gt_empty=gt_empty,
        reached=bool(messages) if reached is None else reached,
        messages=messages,
        calls=calls,
        rejected_messages=rejected_messages,
        check=TurnCheck(model_calls=executed, **check),
    )


def passing(index: int, first_message: int, *names: str) -> TurnEvidence:
    """A GT-replay turn: one message of accepted calls, one closing text message."""
    return turn(
        index, messages=(first_message, first_message + 1), calls=tuple(call(first_message, n) for n in names)
    )


def abstaining(index: int, message: int) -> TurnEvidence:
    return turn(index, gt_empty=True, messages=(message,))


def both(turns: list[TurnEvidence]) -> tuple[list[str], list[str]]:
    return [x.label for x in diagnose(turns, "reference")], [x.label for x in diagnose(turns, "paper")]


# --- the labelled cases ---------------------------------------------------------------------------------


def test_full_replay_with_abstention_passes_everywhere() -> None:
    # full_replay__miss_func_94: the GT-empty turn is answered in plain text.
    turns = [
        passing(0, 0, "estimate_drive_feasibility_by_mileage", "fillFuelTank"),
        abstaining(1, 2),
        passing(2, 3, "check_tire_pressure"),
        passing(3, 5, "pressBrakePedal"),
    ]
    expected = ["pass", "correct_abstention", "pass", "pass"]
    assert both(turns) == (expected, expected)


def test_text_only_turn() -> None:
    # text_only__long_context_57: turn 1 answered with text only.
    turns = [
        passing(0, 0, "get_zipcode_based_on_city"),
        turn(1, messages=(2,), state_ok=True, response_ok=False, detail="GT result missing"),
    ]
    assert both(turns) == (["pass", "empty_turn_model_response"], ["pass", "missing_tool_call"])


def test_rejected_only_malformed_json() -> None:
    # rejected_only__malformed_json__miss_param_138: an unparseable block has no CallEvidence at all.
    turns = [
        abstaining(0, 0),
        passing(1, 1, "get_stock_info"),
        turn(2, messages=(9, 10), rejected_messages=1, state_ok=False),
    ]
    reference, paper = both(turns)
    assert reference == ["correct_abstention", "pass", "empty_turn_model_response"]
    assert paper == ["correct_abstention", "pass", "invalid_tool_call"]
    evidence = diagnose(turns, "paper")[2].evidence
    assert evidence["rejected_messages"] == 1 and evidence["messages"] == [9, 10]


def test_rejected_only_unknown_tool() -> None:
    # rejected_only__unknown_tool__base_35: the whole message is rejected for one unavailable name.
    rejected = (
        call(4, "compare_files", accepted=False, reason="tool not available"),
        call(4, "touch", accepted=False, reason="message rejected"),
    )
    turns = [
        passing(0, 0, "cd"),
        passing(1, 2, "cat"),
        turn(2, messages=(4, 5), calls=rejected, rejected_messages=1, state_ok=False),
    ]
    assert both(turns) == (
        ["pass", "pass", "empty_turn_model_response"],
        ["pass", "pass", "invalid_tool_call"],
    )
    names = [c["name"] for c in diagnose(turns, "paper")[2].evidence["calls"]]
    assert names == ["compare_files", "touch"]


def test_missing_required_argument_outranks_recovery_failure() -> None:
    # missing_required_arg__resolution__miss_func_125: the call errors AND violates the schema.
    bad = call(
        9, "resolve_ticket", error=ERR_MISSING, violations=("missing required parameter 'resolution'",)
    )
    turns = [
        passing(0, 0, "get_watchlist"),
        abstaining(1, 4),
        turn(2, messages=(9, 10), calls=(bad,), state_ok=False),
    ]
    assert both(turns) == (
        ["pass", "correct_abstention", "state_mismatch"],
        ["pass", "correct_abstention", "argument_mismatch"],
    )
    evidence = diagnose(turns, "paper")[2].evidence
    assert evidence["call"]["name"] == "resolve_ticket"
    assert evidence["call"]["schema_violations"] == ["missing required parameter 'resolution'"]


@pytest.mark.parametrize(
    "violation",
    [
        "unknown parameter 'verbose'",  # extra_unknown_arg__verbose__base_43
        "ticket_id: expected integer, got string",  # wrong_type__ticket_id__miss_param_55
        "ignitionMode: 'start' not in enum ['START', 'STOP']",  # enum_violation__ignitionMode__miss_func_69
    ],
)
def test_schema_violations_are_argument_mismatch(violation: str) -> None:
    bad = call(6, "f", error='{"error": "not found"}', violations=(violation,))
    turns = [passing(0, 0, "ls"), turn(1, messages=(6, 7), calls=(call(6, "g"), bad), state_ok=False)]
    assert both(turns) == (["pass", "state_mismatch"], ["pass", "argument_mismatch"])


def test_exec_error_without_recovery() -> None:
    # exec_error__file_name__base_28: the last call of the turn errors, nothing later succeeds.
    echo = call(4, "echo", error='{"error": "echo: cannot write to \'no_such_file.txt\': No such file"}')
    turns = [
        passing(0, 0, "find"),
        passing(1, 2, "cd", "grep"),
        turn(2, messages=(4, 5), calls=(call(4, "du"), call(4, "touch"), echo), state_ok=False),
    ]
    assert both(turns) == (["pass", "pass", "state_mismatch"], ["pass", "pass", "recovery_failure"])
    evidence = diagnose(turns, "paper")[2].evidence
    assert evidence["call"]["name"] == "echo" and "No such file" in evidence["call"]["error"]
    assert evidence["check"]["state_ok"] is False and evidence["messages"] == [4, 5]


def test_error_then_successful_retry_passes() -> None:
    # retry_after_error__travel_class__miss_param_157.
    retry = (
        call(5, "get_flight_cost", error="Error during execution: Invalid travel class."),
        call(6, "get_flight_cost"),
    )
    turns = [passing(0, 0, "list_all_airports"), abstaining(1, 2), turn(2, messages=(5, 6, 7), calls=retry)]
    expected = ["pass", "correct_abstention", "pass"]
    assert both(turns) == (expected, expected)


def test_error_then_success_is_not_recovery_failure_when_the_turn_fails() -> None:
    retry = (call(5, "f", error="Error during execution: boom"), call(6, "f"))
    turns = [turn(0, messages=(5, 6, 7), calls=retry, state_ok=False)]
    assert both(turns) == (["state_mismatch"], ["state_mismatch"])


def test_recovery_failure_names_the_first_call_of_the_unrecovered_tail() -> None:
    calls = (call(1, "a", error="e1"), call(1, "b"), call(2, "c", error="e2"), call(2, "d", error="e3"))
    label = diagnose([turn(0, messages=(1, 2, 3), calls=calls, state_ok=False)], "paper")[0]
    assert label.label == "recovery_failure"
    assert label.evidence["call"]["name"] == "c"
    assert [c["name"] for c in label.evidence["calls"]] == ["c", "d"]


def test_reject_then_correct_resend_passes() -> None:
    # recovery_after_reject__python_syntax__long_context_88: invalid_tool_call only labels failing turns.
    turns = [
        passing(0, 0, "gallon_to_liter"),
        turn(
            1,
            messages=(4, 5, 6),
            rejected_messages=1,
            calls=(call(5, "pressBrakePedal"), call(5, "startEngine")),
        ),
    ]
    assert both(turns) == (["pass", "pass"], ["pass", "pass"])


def test_truncation_with_unreached_gt_empty_turn() -> None:
    # truncation__unreached_empty__miss_func_178: stops in turn 2 after its GT calls, before the text.
    turns = [
        passing(0, 0, "register_credit_card"),
        passing(1, 2, "retrieve_invoice"),
        turn(2, messages=(4,), calls=(call(4, "contact_customer_support"),)),
        turn(3, gt_empty=True),
        turn(4, state_ok=False),
        turn(5, state_ok=False, response_ok=False),
    ]
    reference, paper = both(turns)
    assert reference == [
        "pass",
        "pass",
        "pass",
        "correct_abstention",
        "empty_turn_model_response",
        "empty_turn_model_response",
    ]
    assert paper == ["pass", "pass", "pass", "missing_tool_call", "missing_tool_call", "missing_tool_call"]
    assert diagnose(turns, "paper")[3].evidence["rule"] == "unreached"


def test_spurious_accepted_call_on_gt_empty_turn() -> None:
    # spurious_call__ticket_get_login_status__miss_func_27.
    turns = [
        passing(0, 0, "cd", "mv"),
        turn(1, gt_empty=True, messages=(2, 3), calls=(call(2, "ticket_get_login_status"),)),
        passing(2, 4, "ticket_login", "create_ticket"),
    ]
    expected = ["pass", "spurious_tool_call", "pass"]
    assert both(turns) == (expected, expected)
    assert diagnose(turns)[1].evidence["calls"][0]["name"] == "ticket_get_login_status"


def test_rejected_attempt_on_gt_empty_turn_is_spurious_only_in_paper() -> None:
    rejected = turn(
        0,
        gt_empty=True,
        messages=(0, 1),
        rejected_messages=1,
        calls=(call(0, "unknown_tool", accepted=False, reason="tool not available"),),
    )
    assert both([rejected]) == (["correct_abstention"], ["spurious_tool_call"])


def test_gt_empty_counts_verifier_calls_without_call_evidence() -> None:
    executed = turn(0, gt_empty=True, messages=(0,), model_calls=2)
    assert both([executed]) == (["spurious_tool_call"], ["spurious_tool_call"])


@pytest.mark.parametrize(
    "check, label",
    [
        ({"state_ok": False, "detail": "GorillaFileSystem differs"}, "state_mismatch"),
        ({"response_ok": False, "detail": "GT result missing"}, "response_mismatch"),
        ({"instance_match": False, "state_ok": False}, "instance_mismatch"),
    ],
)
def test_verifier_level_failures(check: dict[str, object], label: str) -> None:
    # state_wrong_value__price__long_context_116, readonly_wrong_value__option__base_74.
    turns = [turn(0, messages=(0, 1), calls=(call(0, "place_order"),), **check)]
    assert both(turns) == ([label], [label])
    assert diagnose(turns)[0].evidence["check"]["detail"] == check.get("detail", "")


# --- priorities -----------------------------------------------------------------------------------------


def test_table5_order_puts_state_mismatch_above_recovery_failure() -> None:
    errored = turn(
        0, messages=(0, 1), calls=(call(0, "touch"), call(0, "echo", error="No such file")), state_ok=False
    )
    assert diagnose([errored], "paper")[0].label == "recovery_failure"
    assert diagnose([errored], "paper", TABLE5_PRIORITY)[0].label == "state_mismatch"
    assert diagnose([errored], "reference", TABLE5_PRIORITY)[0].label == "state_mismatch"


def test_table5_order_puts_state_mismatch_above_missing_tool_call() -> None:
    text_only = turn(0, messages=(0,), state_ok=False)
    assert diagnose([text_only], "paper")[0].label == "missing_tool_call"
    assert diagnose([text_only], "paper", list(TABLE5_PRIORITY))[0].label == "state_mismatch"


def test_custom_priority_is_followed() -> None:
    both_failures = turn(
        0,
        messages=(0,),
        rejected_messages=1,
        state_ok=False,
        calls=(call(0, "f", violations=("unknown parameter 'x'",)),),
    )
    assert diagnose([both_failures], "paper")[0].label == "invalid_tool_call"
    order = [*DEFAULT_PRIORITY[1:], DEFAULT_PRIORITY[0]]
    assert diagnose([both_failures], "paper", order)[0].label == "argument_mismatch"


@pytest.mark.parametrize(
    "priority, message",
    [
        (["bogus", *DEFAULT_PRIORITY[1:]], "unknown label"),
        (list(DEFAULT_PRIORITY[:-1]), "missing"),
        ([*DEFAULT_PRIORITY, "state_mismatch"], "more than once"),
        (["pass", *DEFAULT_PRIORITY], "unknown label"),
        ("invalid_tool_call", "not the string"),
    ],
)
def test_bad_priority_is_rejected(priority: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        diagnose([], "paper", priority)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        diagnose([], "reference", priority)  # type: ignore[arg-type]


def test_unknown_taxonomy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown taxonomy 'table5'"):
        diagnose([], "table5")


# --- excluded labels ------------------------------------------------------------------------------------


def test_gt_and_checker_errors_are_excluded_labels() -> None:
    gt_broken = turn(
        0,
        messages=(0,),
        calls=(call(0, "tail"),),
        gt_error="tail is not available",
        checker_error="also broken",
        state_ok=False,
    )
    checker_broken = turn(1, messages=(1,), checker_error="KeyError", state_ok=False)
    for taxonomy in ("reference", "paper"):
        labels = diagnose([gt_broken, checker_broken], taxonomy)
        assert [x.label for x in labels] == ["gt_error", "checker_error"]
        assert labels[0].evidence["error"] == "tail is not available"


def test_unreached_turn_with_gt_error() -> None:
    broken = turn(0, gt_error="boom")
    assert both([broken]) == (["gt_error"], ["missing_tool_call"])


# --- outputs --------------------------------------------------------------------------------------------


def test_labels_and_evidence_are_json_and_round_trip() -> None:
    turns = [
        turn(
            0,
            messages=(0, 1),
            rejected_messages=1,
            state_ok=False,
            detail="x",
            calls=(
                call(0, "f", accepted=False, reason="bad json"),
                call(1, "g", error="e", violations=("v",)),
            ),
        )
    ]
    for label in diagnose(turns, "paper") + diagnose(turns, "reference"):
        assert json.loads(json.dumps(label.to_dict())) == label.to_dict()
    payload = json.loads(json.dumps([t.to_dict() for t in turns]))
    assert [TurnEvidence.from_dict(t) for t in payload] == turns


@pytest.mark.parametrize(
    "data, message",
    [
        ([], "must be a JSON object"),
        ({"turn": 0}, "missing key 'gt_empty'"),
        (
            {
                "turn": "0",
                "gt_empty": False,
                "reached": True,
                "messages": [],
                "calls": [],
                "rejected_messages": 0,
                "check": {"model_calls": 0},
            },
            "turn has the wrong type",
        ),
        (
            {
                "turn": 0,
                "gt_empty": False,
                "reached": True,
                "messages": [True],
                "calls": [],
                "rejected_messages": 0,
                "check": {"model_calls": 0},
            },
            "messages must be a list of integers",
        ),
        (
            {
                "turn": 0,
                "gt_empty": False,
                "reached": True,
                "messages": [],
                "calls": [{"message": 0}],
                "rejected_messages": 0,
                "check": {"model_calls": 0},
            },
            "missing key 'name'",
        ),
        (
            {
                "turn": 0,
                "gt_empty": False,
                "reached": True,
                "messages": [],
                "calls": [],
                "rejected_messages": 0,
                "check": {"model_calls": 0, "state_ok": "no"},
            },
            "state_ok must be bool",
        ),
    ],
)
def test_malformed_evidence_is_rejected(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TurnEvidence.from_dict(data)  # type: ignore[arg-type]


def test_trajectory_profile_is_share_of_turns() -> None:
    labels = diagnose([passing(0, 0, "a"), abstaining(1, 2), turn(2, messages=(3,)), passing(3, 4, "b")])
    assert trajectory_profile(labels) == {
        "pass": 0.5,
        "correct_abstention": 0.25,
        "empty_turn_model_response": 0.25,
    }
    assert trajectory_profile(["pass", "gt_error"]) == {"pass": 0.5, "gt_error": 0.5}
    assert trajectory_profile([]) == {}


# --- properties -----------------------------------------------------------------------------------------

calls_st = st.builds(
    CallEvidence,
    message=st.integers(0, 5),
    name=st.sampled_from(["", "cd", "ls"]),
    accepted=st.booleans(),
    error=st.one_of(st.none(), st.just("Error during execution: x")),
    schema_violations=st.lists(st.just("missing required parameter 'x'"), max_size=1).map(tuple),
)
turns_st = st.builds(
    TurnEvidence,
    turn=st.integers(0, 9),
    gt_empty=st.booleans(),
    reached=st.booleans(),
    messages=st.lists(st.integers(0, 5), max_size=3).map(tuple),
    calls=st.lists(calls_st, max_size=4).map(tuple),
    rejected_messages=st.integers(0, 2),
    check=st.builds(
        TurnCheck,
        model_calls=st.integers(0, 3),
        instance_match=st.booleans(),
        state_ok=st.booleans(),
        response_ok=st.booleans(),
        gt_error=st.one_of(st.none(), st.just("gt")),
        checker_error=st.one_of(st.none(), st.just("chk")),
    ),
)


@given(st.lists(turns_st, max_size=6), st.permutations(list(DEFAULT_PRIORITY)))
def test_one_label_per_turn_from_the_taxonomy(turns: list[TurnEvidence], priority: list[str]) -> None:
    reference = diagnose(turns, "reference")
    paper = diagnose(turns, "paper", priority)
    assert [x.turn for x in reference] == [x.turn for x in paper] == [t.turn for t in turns]
    assert all(x.label in REFERENCE_LABELS for x in reference)
    assert all(x.label in PAPER_LABELS for x in paper)
    for t, ref, pap in zip(turns, reference, paper, strict=True):
        json.dumps(ref.to_dict())
        json.dumps(pap.to_dict())
        if t.reached:
            assert (ref.label == "pass") == (pap.label == "pass")
            assert ref.label != "spurious_tool_call" or pap.label == "spurious_tool_call"
        else:
            assert pap.label == "missing_tool_call"


@given(turns_st, st.permutations(list(DEFAULT_PRIORITY)))
def test_priority_only_matters_for_failing_reached_turns(t: TurnEvidence, priority: list[str]) -> None:
    default, custom = diagnose([t], "paper")[0], diagnose([t], "paper", priority)[0]
    if default.label not in DEFAULT_PRIORITY or not t.reached:
        assert custom == default
    assert isinstance(custom, Label)


# --- purity ---------------------------------------------------------------------------------------------


def test_tocf_imports_only_stdlib_itself_and_the_verifier_record() -> None:
    package = Path(__file__).resolve().parents[2] / "seal" / "tocf"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert (
                    top in sys.stdlib_module_names
                    or name.startswith("seal.tocf")
                    or name in ("__future__", "seal.bfcl.checks")
                ), f"{path.name} imports {name}"


def test_importing_tocf_loads_no_heavy_modules() -> None:
    code = (
        "import sys, seal.tocf; bad = [m for m in sys.modules if m.split('.')[0] in "
        "{'numpy', 'torch', 'verl', 'ray', 'bfcl_eval'} or (m.startswith('seal.') and not "
        "m.startswith(('seal.tocf', 'seal.bfcl.checks')) and m != 'seal.bfcl')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
