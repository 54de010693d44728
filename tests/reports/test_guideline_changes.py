"""What Evolve told the model: Ω's guidelines at a run's first step and at each step where they changed,
read from `seal_steps.jsonl`, each named guideline with the line Ω adds for it; a run whose Ω had none has
no row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.env.interface import GUIDELINES
from seal.jsonl import JsonLinesError
from seal.reports.guideline_changes import guideline_history, guideline_legend, guideline_rows


def steps_file(path: Path, guidelines_by_step: dict[int, list[str]]) -> Path:
    """A `seal_steps.jsonl` as the trainer appends it: Ω after each step (its other fields left out)."""
    records = [
        {"step": step, "interface": {"version": step, "guidelines": guidelines}}
        for step, guidelines in guidelines_by_step.items()
    ]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def test_the_first_step_and_each_change_of_the_set_are_kept_and_a_reordering_is_no_change():
    steps = {
        1: {"interface": {"guidelines": ["Recover", "Schema"]}},
        2: {"interface": {"guidelines": ["Schema", "Recover"]}},
        3: {"interface": {"guidelines": ["Schema", "Scope"]}},
        4: {"interface": {"guidelines": ["Schema", "Scope"]}},
        5: {"interface": {"guidelines": []}},
    }
    assert guideline_history(steps) == [(1, ("Recover", "Schema")), (3, ("Schema", "Scope")), (5, ())]


def test_an_interface_without_guidelines_at_any_step_has_no_history():
    assert guideline_history({1: {"interface": {"guidelines": []}}, 2: {"interface": None}, 3: {}}) == []


def test_a_row_per_run_with_guidelines_and_the_legend_in_omegas_order(tmp_path):
    closed = steps_file(tmp_path / "closed.jsonl", {1: ["Recover"], 2: ["Recover"], 3: ["Active-respond"]})
    static = steps_file(tmp_path / "static.jsonl", {1: [], 2: []})
    rows, named = guideline_rows(
        [("full loop", 1, closed), ("SEAL", 1, static), ("full loop", 2, tmp_path / "absent.jsonl")]
    )
    assert rows == [
        {
            "arm": "full loop",
            "seed": "1",
            "guidelines at the first step": "Recover",
            "changed": "step 3: + Active-respond, − Recover",
        }
    ]
    assert named == ["Active-respond", "Recover"]  # GUIDELINES lists Active-respond first
    assert guideline_legend(named) == f"- {GUIDELINES['Active-respond']}\n- {GUIDELINES['Recover']}"


def test_guidelines_that_never_changed_say_so(tmp_path):
    steady = steps_file(tmp_path / "steady.jsonl", {1: ["Format", "Schema"], 2: ["Format", "Schema"]})
    (row,), _ = guideline_rows([("full loop", 3, steady)])
    assert (row["guidelines at the first step"], row["changed"]) == ("Format, Schema", "never")


def test_a_broken_steps_file_is_named(tmp_path):
    broken = tmp_path / "seal_steps.jsonl"
    broken.write_text('{"step": 1}\n{"step": "two"}\n')
    with pytest.raises(JsonLinesError, match=r"seal_steps\.jsonl:2"):
        guideline_rows([("full loop", 1, broken)])
