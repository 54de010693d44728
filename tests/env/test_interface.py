"""Ω: presentation on all 800 tasks, φ_err hints on real BFCL errors (no ground-truth leak), Evolve."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from seal.bfcl.calls import ToolCall
from seal.bfcl.executor import Executor
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.schema import parameters
from seal.bfcl.tasks import Task, get_task, load_tasks
from seal.env.interface import (
    FORMAT_REMINDERS,
    GUIDELINE_HEADER,
    GUIDELINES,
    LABEL_GUIDELINE,
    OBSERVATION_NOTE,
    PRESETS,
    RAW,
    Interface,
    InterfaceConfig,
    Pressure,
    build_interface,
    error_message,
    evolve,
    pressures,
)
from seal.protocol import PROTOCOLS
from seal.tocf.profile import ProfileStats

REFERENCE = build_interface("reference")
FULL = build_interface("full")
BAD_FILE = "no_such_file_zz.txt"
UNKNOWN_ARG = "zz_verbose"


def _doc(name: str) -> dict:
    return next(d for task in load_tasks().values() for d in task.all_functions() if d["name"] == name)


DIFF_DOC, START_DOC, LS_DOC = _doc("diff"), _doc("startEngine"), _doc("ls")


# -- presentation ------------------------------------------------------------------------------
def _doc_sets(task: Task) -> list[tuple[dict, ...]]:
    return [task.functions, *task.missed_functions.values()]


def _with_required_marker(doc: dict) -> dict:
    expected = copy.deepcopy(doc)
    schema = expected["parameters"]
    for name in schema.get("required", []):
        schema["properties"][name]["description"] += " [required]"
    return expected


def test_presets_and_raw() -> None:
    assert set(PRESETS) == {"reference", "full", "none"}
    assert build_interface("none") == RAW and RAW.version == 0 and RAW.system_suffix() == ""
    assert REFERENCE.system_suffix() == (
        "Observation note: parameters marked [required] must be provided exactly when calling a tool; "
        "do not invent tools outside the current schema."
    )
    assert REFERENCE.system_suffix() == OBSERVATION_NOTE


def test_present_on_every_task() -> None:
    marked = 0
    for task in load_tasks().values():
        for docs in _doc_sets(task):
            before = json.dumps(docs)
            raw = RAW.present(docs)
            assert raw == list(docs)
            for shown, original in zip(raw, docs, strict=True):
                assert shown is not original and shown["parameters"] is not original["parameters"]
            reference = REFERENCE.present(docs)
            assert reference == [_with_required_marker(doc) for doc in docs]
            marked += sum(len(doc["parameters"].get("required", [])) for doc in docs)
            FULL.present(docs)
            assert json.dumps(docs) == before, f"{task.id}: present() changed the task's docs"
        assert REFERENCE.system_suffix() == OBSERVATION_NOTE
    assert marked > 0


def test_reference_marks_163_of_185_unique_parameters() -> None:
    unique = {doc["name"]: doc for task in load_tasks().values() for doc in task.all_functions()}
    shown = REFERENCE.present(list(unique.values()))
    descriptions = [p["description"] for doc in shown for p in doc["parameters"]["properties"].values()]
    assert len(descriptions) == 185
    assert sum(d.endswith(" [required]") for d in descriptions) == 163


def test_full_schema_cues() -> None:
    task = get_task("multi_turn_base_0")
    (shown,) = FULL.present([START_DOC])
    assert shown["parameters"]["properties"]["ignitionMode"]["description"] == (
        'The ignition mode of the vehicle. [Enum]: ["START", "STOP"] [required] [type: string] '
        "Allowed values: START, STOP"
    )
    presented = FULL.present(task.functions)
    assert FULL.present(presented) == presented  # cues are not stacked twice
    cd = next(d for d in presented if d["name"] == "cd")
    assert cd["parameters"]["properties"]["folder"]["description"].endswith("[required] [type: string]")


# -- φ_err --------------------------------------------------------------------------------------
def _perturbations(call: ToolCall, doc: dict) -> list[tuple[str, dict[str, Any]]]:
    """A model's mistakes: a required argument dropped, an unknown one added, a wrong type, enum or file."""
    specs = parameters(doc)
    args = call.arguments
    out: list[tuple[str, dict[str, Any]]] = [("unknown", {**args, UNKNOWN_ARG: True})]
    required = [name for name in args if name in specs and specs[name].required]
    if required:
        out.append(("drop", {k: v for k, v in args.items() if k != required[0]}))
    wrong = {"integer": str, "float": str, "string": lambda v: 12345, "boolean": lambda v: "yes"}
    for name, value in args.items():
        spec = specs.get(name)
        if spec is None:
            continue
        if spec.type in wrong:
            out.append(("type", {**args, name: wrong[spec.type](value)}))
        elif spec.type == "array":
            out.append(("type", {**args, name: value[0] if value else "x"}))
        elif spec.type == "dict":
            out.append(("type", {**args, name: "x"}))
        if spec.enum:
            out.append(("enum", {**args, name: "zz_not_allowed"}))
        if spec.type == "string" and re.search(r"file|dir|folder|source|destination|path", name):
            out.append(("file", {**args, name: BAD_FILE}))
    return out


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, bool) or value is None:
        return []
    return [str(value)]


def _leaked(hint: str, secrets: set[str], allowed: str) -> list[str]:
    return [
        s
        for s in secrets
        if s not in allowed and re.search(rf"(?<!\w){re.escape(s)}(?!\w)", hint) is not None
    ]


def test_error_hints_never_leak_ground_truth() -> None:
    """Every perturbed ground-truth call of all 800 tasks runs on the episode's executor; no hint
    names a ground-truth value that is not in the model's own call or the tool's doc."""
    kinds: Counter[str] = Counter()
    hinted = 0
    for task in load_tasks().values():
        docs = {doc["name"]: doc for doc in task.all_functions()}
        gt = ground_truth_calls(task)
        secrets = {leaf for turn in gt for call in turn for leaf in _leaves(call.arguments)}
        executor = Executor(task)
        for turn in gt:
            for call in turn:
                doc = docs[call.name]
                for kind, arguments in _perturbations(call, doc):
                    result = executor.execute(ToolCall(call.name, arguments))
                    if result.error is None:
                        continue
                    kinds[kind] += 1
                    allowed = " ".join((call.name, json.dumps(arguments), repr(arguments), json.dumps(doc)))
                    for given in (None, arguments):
                        hint = FULL.error_hint(call.name, result.text, doc, given)
                        assert hint is not None, (task.id, result.text)
                        assert hint.startswith("[Hint] ") and "\n" not in hint and f"`{call.name}`" in hint
                        assert not _leaked(hint, secrets, allowed), (task.id, arguments, hint)
                        assert REFERENCE.error_hint(call.name, result.text, doc, given) is None
                        hinted += 1
                executor.execute(call)
    assert set(kinds) == {"unknown", "drop", "type", "enum", "file"}
    assert hinted > 20_000


def test_leak_check_catches_a_leak() -> None:
    assert _leaked("[Hint] `cd` try 'temp'", {"temp"}, "cd {}") == ["temp"]
    assert _leaked("[Hint] `cd` try 'temp'", {"temp"}, "cd {'folder': 'temp'}") == []
    assert _leaked("[Hint] `cd` file_name1", {"1"}, "") == []


@pytest.mark.parametrize(
    ("tool", "result", "doc", "arguments", "hint"),
    [
        (
            "resolve_ticket",
            "Error during execution: TicketAPI.resolve_ticket() missing 1 required positional argument: "
            "'resolution'",
            None,
            None,
            "`resolve_ticket` is missing required parameter(s) 'resolution'; provide every parameter marked "
            "[required].",
        ),
        (
            "diff",
            "Error during execution: GorillaFileSystem.diff() missing 2 required positional arguments: "
            "'file_name1' and 'file_name2'",
            DIFF_DOC,
            None,
            "`diff` is missing required parameter(s) 'file_name1' (string), 'file_name2' (string); provide "
            "every parameter marked [required].",
        ),
        (
            "startEngine",
            "Error during execution: VehicleControlAPI.startEngine() missing 1 required positional argument: "
            "'ignitionMode'",
            START_DOC,
            None,
            "`startEngine` is missing required parameter(s) 'ignitionMode' (string, one of: START, STOP); "
            "provide every parameter marked [required].",
        ),
        (
            "ls",
            "Error during execution: GorillaFileSystem.ls() got an unexpected keyword argument 'verbose'",
            LS_DOC,
            None,
            "`ls` has no parameter 'verbose'; its parameters are a.",
        ),
        (
            "diff",
            "Error during execution: '<' not supported between instances of 'str' and 'int'",
            DIFF_DOC,
            None,
            "`diff` got an argument of the wrong type; match every value to its declared type: "
            "file_name1 (string), file_name2 (string).",
        ),
        (
            "cat",
            '{"error": "cat: \'x.txt\': No such file or directory"}',
            None,
            None,
            "`cat` named a file or directory that does not exist where you are; list the current directory "
            "and use a name exactly as listed.",
        ),
        (
            "echo",
            "echo: cannot write to 'x.txt': No such file",
            None,
            None,
            "`echo` named a file or directory that does not exist where you are; list the current directory "
            "and use a name exactly as listed.",
        ),
        (
            "mv",
            '{"error": "mv: path not allowed in destination. Provide only a file or directory name."}',
            None,
            None,
            "`mv` accepts only a plain name in the current directory, not a path; move step by step.",
        ),
        (
            "post_tweet",
            '{"error": "User not authenticated. Please authenticate before posting."}',
            None,
            None,
            "`post_tweet` needs an authenticated session; log in with this API's login or "
            "authentication function, then use exactly what it returns.",
        ),
        (
            "startEngine",
            '{"error": "Invalid ignition mode."}',
            START_DOC,
            None,
            "`startEngine` rejected a value; use only the allowed values (ignitionMode: START, STOP).",
        ),
        (
            "startEngine",
            '{"error": "Invalid ignition mode."}',
            START_DOC,
            {"ignitionMode": "start"},
            "`startEngine` call breaks its schema: Parameter 'ignitionMode' must be one of: START, STOP. "
            "Fix the arguments and retry.",
        ),
        (
            "ls",
            "Error during execution: GorillaFileSystem.ls() got an unexpected keyword argument 'verbose'",
            LS_DOC,
            {"verbose": True},
            "`ls` call breaks its schema: Unknown parameter 'verbose'. "
            "Fix the arguments (its parameters are a) and retry.",
        ),
        (
            "compare",
            "Error during execution: name 'compare' is not defined",
            None,
            None,
            "`compare` is not a tool available now; call only functions from the current tool list.",
        ),
        (
            "close_ticket",
            '{"error": "Ticket with ID 2 not found."}',
            None,
            None,
            "`close_ticket` reported an error; correct the argument it points to, "
            "or make the call it depends on, then retry.",
        ),
    ],
)
def test_error_hint_classes(
    tool: str, result: str, doc: dict | None, arguments: dict | None, hint: str
) -> None:
    assert FULL.error_hint(tool, result, doc, arguments) == f"[Hint] {hint}"
    assert REFERENCE.error_hint(tool, result, doc, arguments) is None
    assert RAW.error_hint(tool, result, doc, arguments) is None


def test_error_hint_ignores_successes() -> None:
    assert FULL.error_hint("displayCarStatus", '{"fuelLevel": 20.04}', START_DOC) is None
    assert FULL.error_hint("ls", "", LS_DOC) is None
    assert (
        error_message('{"booking_status": false, "error": "Invalid access token"}') == "Invalid access token"
    )
    assert error_message("Error during execution: 'd'") == "'d'"


def test_parse_error_hint() -> None:
    names = [f"tool_{i}" for i in range(15)]
    hint = FULL.parse_error_hint(["Invalid tool call JSON: Expecting ',' delimiter"], names)
    assert hint is not None
    lines = hint.split("\n")
    assert len(lines) == 3 and all(line.startswith("[Hint] ") for line in lines)
    assert "<tool_call>" in lines[0] and '"arguments"' in lines[0]
    assert lines[1] == f"[Hint] Available tools: {', '.join(names[:12])}, ... (+3 more)."
    assert "plain text" in lines[2]
    assert "[tool_a(arg=value)" in (FULL.parse_error_hint(["bad"], ["ls"], protocol="python_list") or "")
    assert "format described in the system prompt" in (
        FULL.parse_error_hint(["bad"], ["ls"], protocol="other") or ""
    )
    assert FULL.parse_error_hint([], names) is None
    assert REFERENCE.parse_error_hint(["bad"], names) is None


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_a_rejected_message_is_reminded_of_its_own_protocol_s_call_format(protocol) -> None:
    assert FULL.parse_error_hint(["bad"], ["ls"], protocol=protocol).startswith(
        f"[Hint] {FORMAT_REMINDERS[protocol]}"
    )


# -- Evolve ------------------------------------------------------------------------------------
def _scope(labels: dict[str, tuple[int, float]], trajectories: int = 50) -> dict[str, Any]:
    """A profile scope from {label: (count, mean reward)}."""
    return {
        "trajectories": trajectories,
        "labels": {label: n for label, (n, _) in labels.items()},
        "reward_sum": {label: n * r for label, (n, r) in labels.items()},
        "by_category": {},
    }


def _profile(window: dict[str, tuple[int, float]], total: dict[str, tuple[int, float]] | None = None) -> dict:
    return {"version": 1, "window": _scope(window), "total": _scope(total if total is not None else window)}


STEPS: list[tuple[dict, tuple[str, ...]]] = [
    # over 105 failures: state .38, empty_turn .29, response .19, instance .095, spurious (5 < min_count)
    (
        _profile(
            {
                "state_mismatch": (40, 0.0),
                "empty_turn_model_response": (30, 0.0),
                "response_mismatch": (20, 0.0),
                "instance_mismatch": (10, 0.0),
                "spurious_tool_call": (5, 0.0),
                "pass": (200, 1.0),
                "correct_abstention": (50, 1.0),
                "checker_error": (30, 0.0),
            }
        ),
        ("Active-respond", "State-aware", "Format"),
    ),
    # instance rises (.27) and takes the third slot from response (.107, still above its stay floor)
    (
        _profile(
            {
                "state_mismatch": (40, 0.0),
                "empty_turn_model_response": (30, 0.0),
                "instance_mismatch": (30, 0.0),
                "response_mismatch": (12, 0.0),
            }
        ),
        ("Active-respond", "State-aware", "Scope"),
    ),
    # empty turns now mostly end in reward 1: solved, dropped; response (.107) is inactive and below .12
    (
        _profile(
            {
                "state_mismatch": (40, 0.0),
                "empty_turn_model_response": (30, 0.9),
                "instance_mismatch": (30, 0.0),
                "response_mismatch": (12, 0.0),
            }
        ),
        ("State-aware", "Scope"),
    ),
    # an empty window falls back to the total
    (
        _profile({}, {"spurious_tool_call": (50, 0.2), "state_mismatch": (5, 0.0), "pass": (500, 1.0)}),
        ("Cautious-call",),
    ),
    # the paper taxonomy's labels; missing_tool_call and empty_turn_model_response share Active-respond
    (
        _profile(
            {
                "argument_mismatch": (30, 0.0),
                "invalid_tool_call": (20, 0.0),
                "recovery_failure": (25, 0.1),
                "missing_tool_call": (6, 0.0),
                "empty_turn_model_response": (6, 0.0),
                "spurious_tool_call": (13, 0.0),
            }
        ),
        ("Schema", "Call-format", "Recover"),
    ),
    # a window of passes only: nothing to address
    (_profile({"pass": (300, 1.0), "correct_abstention": (20, 1.0)}), ()),
]


def test_guideline_sequence() -> None:
    interface = FULL
    for step, (profile, expected) in enumerate(STEPS, start=1):
        interface = evolve(interface, profile)
        assert interface.version == step
        assert interface.guidelines == expected, step
        assert interface.profile == profile
        suffix = interface.system_suffix()
        if expected:
            block = "\n".join([GUIDELINE_HEADER, *(f"- {GUIDELINES[g]}" for g in expected)])
            assert suffix == f"{OBSERVATION_NOTE}\n\n{block}"
        else:
            assert suffix == OBSERVATION_NOTE


def test_reference_preset_evolves_statically() -> None:
    interface = REFERENCE
    for step, (profile, _) in enumerate(STEPS, start=1):
        interface = evolve(interface, profile)
        assert interface.version == step and interface.guidelines == () and interface.profile == profile
        assert interface.system_suffix() == OBSERVATION_NOTE
        assert interface.present([LS_DOC]) == REFERENCE.present([LS_DOC])


def test_evolve_with_a_version_selects_as_usual_and_numbers_the_result_as_told() -> None:
    profile = _hovering(300)
    numbered = evolve(FULL, profile, version=7)
    assert numbered == replace(evolve(FULL, profile), version=7)
    assert evolve(numbered, profile).version == 8
    with pytest.raises(ValueError, match="non-negative integer"):
        evolve(FULL, profile, version=-1)


def _hovering(state_count: int) -> dict:
    """state_mismatch at state_count/1000 of the failures; response_mismatch holds the rest."""
    return _profile({"state_mismatch": (state_count, 0.0), "response_mismatch": (1000 - state_count, 0.0)})


def test_hovering_label_does_not_flap() -> None:
    counts = [99, 101] * 5
    inactive = FULL
    for n in counts:
        inactive = evolve(inactive, _hovering(n))
        assert inactive.guidelines == ("Format",)
    active = evolve(FULL, _hovering(300))
    assert active.guidelines == ("State-aware", "Format")
    for n in counts:
        active = evolve(active, _hovering(n))
        assert active.guidelines == ("State-aware", "Format")
    assert evolve(active, _hovering(79)).guidelines == ("Format",)
    assert evolve(inactive, _hovering(119)).guidelines == ("Format",)
    assert evolve(inactive, _hovering(120)).guidelines == ("State-aware", "Format")


def _ranked(fourth: int) -> dict:
    return _profile(
        {
            "state_mismatch": (300, 0.0),
            "response_mismatch": (250, 0.0),
            "instance_mismatch": (225 - fourth // 2, 0.0),
            "spurious_tool_call": (225 + fourth // 2, 0.0),
        }
    )


def test_close_ranks_do_not_swap_slots() -> None:
    """Four eligible guidelines, three lines: the fourth must beat the third by more than the hysteresis."""
    sticky = evolve(FULL, _ranked(-20))
    assert sticky.guidelines == ("State-aware", "Scope", "Format")
    for fourth in [10, -10] * 3:
        sticky = evolve(sticky, _ranked(fourth))
        assert sticky.guidelines == ("State-aware", "Scope", "Format")
    assert evolve(sticky, _ranked(30)).guidelines == ("Cautious-call", "State-aware", "Format")
    flappy = [evolve(build_interface("full", hysteresis=0.0), _ranked(f)).guidelines for f in (10, -10)]
    assert flappy[0] != flappy[1]


def test_pressures() -> None:
    stats = ProfileStats(
        labels={"missing_tool_call": 6, "empty_turn_model_response": 4, "state_mismatch": 10, "pass": 99},
        reward_sum={"missing_tool_call": 3.0, "state_mismatch": 0.0},
    )
    found = pressures(stats)
    assert found == {"Active-respond": Pressure(10, 0.5, 0.3), "State-aware": Pressure(10, 0.5, 0.0)}
    assert found["Active-respond"].pressure == pytest.approx(0.35)
    assert set(LABEL_GUIDELINE.values()) == set(GUIDELINES)


@pytest.mark.parametrize(
    "profile",
    [
        None,
        [],
        {},
        {"window": {}, "total": {}},
        {"version": 2, "window": {}, "total": {}},
        {"version": 1, "window": {}},
        {"version": 1, "window": [], "total": {}},
        {"version": 1, "window": {"labels": {"pass": -1}}, "total": {}},
        {"version": 1, "window": {"labels": {"pass": True}}, "total": {}},
        {"version": 1, "window": {"reward_sum": {"pass": "x"}}, "total": {}},
        {"version": 1, "window": {"label": {"pass": 1}}, "total": {}},
        {"version": 1, "window": {}, "total": {}, "extra": 1},
    ],
)
def test_malformed_profiles_are_rejected(profile: Any) -> None:
    with pytest.raises(ValueError):
        evolve(FULL, profile)


def test_round_trip() -> None:
    evolved = evolve(evolve(FULL, STEPS[0][0]), STEPS[1][0])
    static = evolve(REFERENCE, STEPS[0][0])
    for interface in (
        RAW,
        REFERENCE,
        FULL,
        evolved,
        static,
        build_interface("full", max_lines=1, min_count=2),
    ):
        data = json.loads(json.dumps(interface.to_json()))
        assert Interface.from_json(data) == interface
        assert data["system_suffix"] == interface.system_suffix()
    assert evolved.to_json()["guidelines"] == ["Active-respond", "State-aware", "Scope"]


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"config": FULL.to_json()["config"]},
        {**FULL.to_json(), "extra": 1},
        {**FULL.to_json(), "guidelines": ["Nope"]},
        {**FULL.to_json(), "guidelines": ["Format", "Scope"]},
        {**FULL.to_json(), "guidelines": ["Format", "Format"]},
        {**REFERENCE.to_json(), "guidelines": ["Format"]},
        {**FULL.to_json(), "version": -1},
        {**FULL.to_json(), "version": True},
        {**FULL.to_json(), "config": {**FULL.to_json()["config"], "bogus": 1}},
        {**FULL.to_json(), "config": {"note": True}},
        {**FULL.to_json(), "profile": {"version": 3}},
    ],
)
def test_from_json_rejects_malformed(data: Any) -> None:
    with pytest.raises(ValueError):
        Interface.from_json(data)


def test_build_interface() -> None:
    assert build_interface() == REFERENCE
    assert build_interface("full", max_lines=2).config.max_lines == 2
    assert build_interface("none", note=True).system_suffix() == OBSERVATION_NOTE
    with pytest.raises(ValueError, match="unknown interface preset"):
        build_interface("fancy")
    with pytest.raises(ValueError, match="unknown interface config key"):
        build_interface("full", max_line=2)
    for bad in (
        {"min_count": "8"},
        {"note": 1},
        {"min_prevalence": 1.5},
        {"hysteresis": -0.1},
        {"max_lines": -1},
    ):
        with pytest.raises(ValueError):
            build_interface("full", **bad)
    with pytest.raises(ValueError):
        InterfaceConfig(True, True, True, True, True, True, max_reward=2.0)


def test_interface_is_immutable() -> None:
    with pytest.raises(AttributeError):
        FULL.version = 3  # type: ignore[misc]
    evolved = evolve(FULL, STEPS[0][0])
    assert FULL.version == 0 and FULL.guidelines == () and FULL.profile is None
    assert evolved.profile is not STEPS[0][0]
