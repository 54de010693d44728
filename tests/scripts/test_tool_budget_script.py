"""benchmarks/tool_budget.py: the ground truth within the tool budget, and a failure when a budget is too
low."""

from __future__ import annotations

import functools
import json

from seal.env.budget import ToolBudget
from seal.env.episode import Episode, EpisodeLimits
from tests.support.script_module import load_script

tool_budget = load_script("tool_budget")


def test_the_ground_truth_passes_within_the_default_budget(capsys):
    assert tool_budget.main(["--split", "val", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tasks"] == 100 and report["failed"] == []
    for row in report["maxima"].values():
        assert row["max"] > 0 and (row["budget"] is None or row["max"] < row["budget"])


def test_a_budget_the_ground_truth_meets_fails_the_run_naming_the_tasks(capsys, monkeypatch):
    tight = EpisodeLimits(budget=ToolBudget(max_calls_per_message=1))
    monkeypatch.setattr(tool_budget, "Episode", functools.partial(Episode, limits=tight))
    assert tool_budget.main(["--split", "val", "--json"]) == 1
    failed = json.loads(capsys.readouterr().out)["failed"]
    assert failed and all(task_id.startswith("multi_turn_") for task_id in failed)
