"""benchmarks/episode_budget.py: ground truth through the real agent loop under an experiment's limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seal.trainer.sft.data import episode_config
from tests.support.rollout_helpers import TASKS, model_folder
from tests.support.script_module import load_script

episode_budget = load_script("episode_budget")
EXP = Path(__file__).resolve().parents[2] / "exp"
SEAL_YAML = EXP / "SEAL.yaml"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"))


def budget(folder: Path, capsys: pytest.CaptureFixture[str], *overrides: str) -> dict:
    argv = ["--tokenizer", str(folder), "--conf", str(SEAL_YAML), "--tasks", ",".join(TASKS), "--json"]
    assert episode_budget.main([*argv, *overrides]) == 0
    return json.loads(capsys.readouterr().out)


def test_under_the_paper_limits_every_ground_truth_completes_and_passes(folder, capsys):
    table = budget(folder, capsys)
    assert set(table) == {task.rsplit("_", 1)[0] for task in TASKS}
    for row in table.values():
        assert row["n"] == row["completed"] == row["passed"] == 1
        assert row["cut_context"] == row["cut_calls"] == row["trained_cut"] == 0


def test_tighter_limits_are_counted_per_cut(folder, capsys):
    table = budget(folder, capsys, "data.max_response_length=64", "seal.rollout.max_llm_calls=2")
    rows = table.values()
    assert sum(row["cut_calls"] for row in rows) >= 1 and sum(row["trained_cut"] for row in rows) >= 3
    for row in rows:
        assert row["completed"] + row["cut_context"] + row["cut_calls"] + row["cut_generation"] == row["n"]


def test_a_folder_without_a_model_config_is_refused_in_one_line(tmp_path, capsys):
    assert episode_budget.main(["--tokenizer", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_train_mode_plays_the_interface_of_the_experiment_s_preset(folder):
    """SEAL.yaml's Ω preset is `reference`, vanilla_grpo.yaml's `none` (the raw interface eval mode shows)."""
    openings = {}
    for conf in ("vanilla_grpo.yaml", "SEAL.yaml"):
        config = episode_config(EXP / conf, folder)
        for mode in ("train", "eval"):
            ((output, fields),) = episode_budget.play(config, [TASKS[0]], mode)
            assert fields.reward == 1.0
            openings[conf, mode] = output.prompt_ids
    raw = openings["vanilla_grpo.yaml", "eval"]
    assert openings["vanilla_grpo.yaml", "train"] == raw == openings["SEAL.yaml", "eval"]
    assert openings["SEAL.yaml", "train"] != raw
