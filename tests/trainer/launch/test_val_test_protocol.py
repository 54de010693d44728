"""The val/test protocol on a fixture run: per-step val dumps as verl writes them, checkpoints in verl's
layout; the best checkpoint is chosen by the val mean of the four category pass rates, test is reported
for it and for the last checkpoint, and test numbers never influence the choice."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from datasets import Dataset
from omegaconf import DictConfig

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.reports.runs import REPORT_NAME, read_dump, split_of, validation_history
from seal.results.pass_rate import score_rows
from seal.trainer.experiment import PROJECT_ROOT, compose_experiment
from seal.trainer.launch.holdout import TEST_FILE, checkpoint_steps, evaluate_test, select_checkpoints

VAL = {  # step -> passes per category out of 25 (val: 25 tasks per category)
    0: (2, 1, 1, 0),
    10: (8, 5, 4, 3),
    20: (12, 9, 8, 8),  # the best val mean (37/100)
    30: (13, 7, 6, 7),  # the last checkpoint: best base, lower mean (33/100)
}
SAVED = (10, 20, 30)


def dump_rows(step: int, passes: tuple[int, ...], per_category: int) -> list[dict[str, Any]]:
    """Rows in the layout of verl's `_validate` dump with SEAL's reward_extra_info keys."""
    rows = []
    for category, n_pass in zip(CATEGORIES, passes, strict=True):
        for i in range(per_category):
            task_id = f"{category}_{i}"
            score = 1.0 if i < n_pass else 0.0
            rows.append(
                {
                    "input": "...",
                    "output": "...",
                    "gts": task_id,
                    "score": score,
                    "step": step,
                    "uid": f"u{i}_0_0",
                    "task_id": task_id,
                    "category": category,
                    "reward": score,
                    "labels": json.dumps(["pass"] if score else ["state_mismatch"]),
                    "action_log": json.dumps({"task_id": task_id, "protocol": "qwen_fc", "actions": []}),
                }
            )
    return rows


def write_dump(folder: Path, step: int, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{step}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def run(tmp_path) -> DictConfig:
    config = compose_experiment(
        PROJECT_ROOT / "exp" / "SEAL.yaml",
        [
            f"trainer.default_local_dir={tmp_path / 'run' / 'checkpoints'}",
            f"trainer.validation_data_dir={tmp_path / 'run' / 'validation'}",
        ],
    )
    for step, passes in VAL.items():
        write_dump(Path(config.trainer.validation_data_dir), step, dump_rows(step, passes, 25))
    for step in SAVED:
        (Path(config.trainer.default_local_dir) / f"global_step_{step}" / "actor").mkdir(parents=True)
    return config


class ValOnlyPass:
    """Stands in for verl's val_only pass (which needs GPUs): writes the test dump it would write."""

    def __init__(self, test_passes: dict[int, tuple[int, ...]]) -> None:
        self.test_passes = test_passes
        self.configs: list[DictConfig] = []

    def __call__(self, config: DictConfig) -> None:
        self.configs.append(config)
        step = int(config.trainer.resume_from_path.rsplit("global_step_", 1)[1])
        rows = dump_rows(step, self.test_passes[step], 75)
        write_dump(Path(config.trainer.validation_data_dir), step, rows)


def test_score_is_the_mean_of_the_four_category_pass_rates(run):
    score = read_dump(Path(run.trainer.validation_data_dir) / "20.jsonl")
    assert score.n == 100
    assert score.by_category == dict(zip(CATEGORIES, [12 / 25, 9 / 25, 8 / 25, 8 / 25], strict=True))
    assert score.mean == pytest.approx((12 + 9 + 8 + 8) / 100)
    unbalanced = score_rows(
        [{"gts": "multi_turn_base_1", "score": 1.0}] * 3 + [{"gts": "multi_turn_miss_func_1", "score": 0.0}],
        5,
    )
    assert unbalanced.mean == 0.5  # categories weigh equally, not rows


def test_the_best_checkpoint_is_chosen_by_val_mean_among_saved_steps(run):
    selection = select_checkpoints(Path(run.trainer.validation_data_dir), Path(run.trainer.default_local_dir))
    assert (selection.best_step, selection.last_step) == (20, 30)
    assert set(selection.val_mean) == set(SAVED)  # step 0 (the base model) has no checkpoint
    assert checkpoint_steps(Path(run.trainer.default_local_dir)) == list(SAVED)
    assert set(validation_history(Path(run.trainer.validation_data_dir))) == set(VAL)


def test_a_val_tie_goes_to_the_earliest_step(run):
    val_dir = Path(run.trainer.validation_data_dir)
    write_dump(val_dir, 30, dump_rows(30, VAL[20], 25))
    assert select_checkpoints(val_dir, Path(run.trainer.default_local_dir)).best_step == 20


def test_test_is_reported_for_the_best_val_and_the_last_checkpoint(run):
    val_only = ValOnlyPass({20: (40, 30, 25, 20), 30: (45, 28, 26, 24)})
    report = evaluate_test(run, run=val_only)

    assert report["selection"]["best_step"] == 20
    assert report["selection"]["last_step"] == 30
    assert report["test"]["best"]["step"] == 20
    assert report["test"]["best"]["mean"] == pytest.approx((40 + 30 + 25 + 20) / 300)
    assert report["test"]["last"]["mean"] == pytest.approx((45 + 28 + 26 + 24) / 300)
    assert report["test"]["best"]["n"] == 300
    run_dir = Path(run.trainer.default_local_dir).parent
    assert json.loads((run_dir / REPORT_NAME).read_text()) == report

    assert len(val_only.configs) == 2
    for config, step in zip(val_only.configs, (20, 30), strict=True):
        trainer = config.trainer
        assert (trainer.val_only, trainer.val_before_train, trainer.resume_mode) == (
            True,
            True,
            "resume_path",
        )
        assert trainer.resume_from_path == str(Path(run.trainer.default_local_dir) / f"global_step_{step}")
        assert list(config.data.val_files) == [str(TEST_FILE)]
        assert Path(trainer.validation_data_dir) == run_dir / "test" / f"global_step_{step}"
        assert config.seal.interface.adapt is False
    assert run.trainer.val_only is False  # the training config itself is left as it was


def test_test_numbers_never_influence_the_choice(run):
    """Whatever test says — the last checkpoint far ahead, or every test dump already on disk — the
    choice is the val-best one; changing val, by contrast, changes it."""
    val_dir, ckpt_dir = Path(run.trainer.validation_data_dir), Path(run.trainer.default_local_dir)
    last_far_ahead = evaluate_test(run, run=ValOnlyPass({20: (1, 0, 0, 0), 30: (75, 75, 75, 75)}))
    assert last_far_ahead["selection"]["best_step"] == 20
    assert last_far_ahead["test"]["last"]["mean"] > last_far_ahead["test"]["best"]["mean"]
    assert select_checkpoints(val_dir, ckpt_dir).best_step == 20  # with the test dumps now on disk

    write_dump(val_dir, 30, dump_rows(30, (20, 20, 20, 20), 25))
    assert select_checkpoints(val_dir, ckpt_dir).best_step == 30


def test_a_run_without_a_validated_checkpoint_is_a_clear_error(run):
    val_dir = Path(run.trainer.validation_data_dir)
    for step in SAVED:
        (val_dir / f"{step}.jsonl").unlink()
    with pytest.raises(ValueError, match="no saved checkpoint has a val result"):
        select_checkpoints(val_dir, Path(run.trainer.default_local_dir))


def trainer_validating(task_ids: list[str]):
    """A SealPPOTrainer (no model) whose validation set holds `task_ids`, as verl's RLHFDataset does."""
    from seal.trainer.rl.trainer import SealPPOTrainer

    trainer = object.__new__(SealPPOTrainer)
    trainer.global_steps = 10
    frame = Dataset.from_list([{"reward_model": {"style": "rule", "ground_truth": t}} for t in task_ids])
    trainer.val_dataset = SimpleNamespace(dataframe=frame)
    return trainer


def val_metrics(trainer, rows: list[dict[str, Any]]) -> dict[str, float]:
    return trainer._val_metrics_update(
        data_sources=[row["category"] for row in rows],
        sample_uids=[f"u{i}" for i in range(len(rows))],
        reward_extra_infos_dict={
            "reward": [row["score"] for row in rows],
            "task_id": [row["task_id"] for row in rows],
        },
        sample_turns=[2] * len(rows),
    )


def test_validation_logs_the_pass_rate_per_category_and_their_mean():
    rows = dump_rows(10, VAL[10], 25)
    trainer = trainer_validating([row["task_id"] for row in rows])
    metrics = val_metrics(trainer, rows)
    assert metrics["val-core/seal/pass_rate_mean"] == pytest.approx(sum(VAL[10]) / 100)
    assert metrics["val-aux/seal/pass_rate/multi_turn_base"] == pytest.approx(VAL[10][0] / 25)
    assert metrics["val-core/multi_turn_base/reward/mean@1"] == pytest.approx(VAL[10][0] / 25)  # verl's own
    assert metrics["val-aux/seal/missing_rows"] == 0.0

    doubled = {"reward": [row["score"] for row in rows] * 2}  # a reward_extra_info with its own 'reward' key
    with pytest.raises(ValueError, match="must not have a 'reward' key"):
        trainer._val_metrics_update([row["category"] for row in rows], list(range(len(rows))), doubled, [])


def test_a_val_task_without_a_row_is_scored_0_named_and_kept_in_the_denominator(tmp_path, caplog):
    rows = dump_rows(10, VAL[10], 25)  # base: tasks 0..7 pass
    trainer = trainer_validating([row["task_id"] for row in rows])
    lost = ["multi_turn_base_0", "multi_turn_base_24"]  # a pass and a failure that verl dropped
    kept = [row for row in rows if row["task_id"] not in lost]

    metrics = val_metrics(trainer, kept)
    assert metrics["val-aux/seal/pass_rate/multi_turn_base"] == pytest.approx((VAL[10][0] - 1) / 25)
    assert metrics["val-core/seal/pass_rate_mean"] == pytest.approx((sum(VAL[10]) - 1) / 100)
    assert metrics["val-aux/seal/missing_rows"] == 2.0

    trainer._init_dump_executor()
    extra = {key: [row[key] for row in kept] for key in ("task_id", "category", "labels")}
    trainer._dump_generations(
        [""] * len(kept),
        [""] * len(kept),
        [row["gts"] for row in kept],
        [row["score"] for row in kept],
        extra,
        str(tmp_path),
    )
    trainer._shutdown_dump_executor()
    with caplog.at_level("WARNING"):
        score = read_dump(tmp_path / "10.jsonl")
    assert score.n == 100 and score.missing_task_ids == lost
    assert score.by_category["multi_turn_base"] == pytest.approx((VAL[10][0] - 1) / 25)
    assert (
        "2 task(s) came back without a validation row and count as failed: " + ", ".join(lost) in caplog.text
    )
    written = [json.loads(line) for line in (tmp_path / "10.jsonl").read_text().splitlines()]
    assert [(row["gts"], row["score"], row["split"]) for row in written if row["missing"]] == [
        (task_id, 0.0, split_of(task_id)) for task_id in lost
    ]


def test_the_test_report_names_the_tasks_without_a_row(run):
    class LosesOneTask(ValOnlyPass):
        def __call__(self, config: DictConfig) -> None:
            super().__call__(config)
            step = int(config.trainer.resume_from_path.rsplit("global_step_", 1)[1])
            folder = Path(config.trainer.validation_data_dir)
            rows = [json.loads(line) for line in (folder / f"{step}.jsonl").read_text().splitlines()]
            rows[0] = {**rows[0], "score": 0.0, "missing": True}  # as SealPPOTrainer writes a lost row
            write_dump(folder, step, rows)

    report = evaluate_test(run, run=LosesOneTask({20: (40, 30, 25, 20), 30: (45, 28, 26, 24)}))
    assert report["test"]["best"]["missing_task_ids"] == ["multi_turn_base_0"]
    assert report["test"]["best"]["n"] == 300
    assert report["test"]["best"]["by_category"]["multi_turn_base"] == pytest.approx(39 / 75)


def test_the_validation_dump_carries_each_rows_split(tmp_path):
    gts = [split_ids("train")[0], "not_a_task", split_ids("val")[0], split_ids("test")[0]]
    trainer = trainer_validating(gts)
    trainer._init_dump_executor()
    n = len(gts)
    trainer._dump_generations(["in"] * n, ["out"] * n, gts, [0.0] * n, {"labels": ["[]"] * n}, str(tmp_path))
    trainer._shutdown_dump_executor()
    rows = [json.loads(line) for line in (tmp_path / "10.jsonl").read_text().splitlines()]
    assert [row["split"] for row in rows] == ["train", "", "val", "test"]
    assert [row["labels"] for row in rows] == ["[]"] * n
