"""`seal.finish_by`: verl's own `fit` loop, with the steps, the clock and validation scripted, ends its steps
early enough that the last one's validation and test pass are over by the set time, and runs every step
without it."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from verl.trainer.ppo.v1 import trainer_base

from seal.trainer.experiment import PROJECT_ROOT, ExperimentError, check_values, compose_experiment
from seal.trainer.rl import trainer as trainer_module
from seal.trainer.rl.finish_by import FinishBy, closing_seconds
from seal.trainer.rl.trainer import SealPPOTrainer
from tests.support.scripted_validation import bare_trainer, scripted_validate, write_split_files

PLANNED = 16
START = 1_000.0
STEP_S = 40.0
TASK_S = 0.2  # a validation of 100 tasks takes 20 s, the test pass of 300 takes 60 s


class Clock:
    """Unix time and perf_counter at once, moved only by the scripted steps and validations."""

    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now

    perf_counter = time


@pytest.fixture
def run_fit(tmp_path, monkeypatch):
    """Runs verl's `fit` for PLANNED steps of STEP_S s (step 0's validation first), with `seal.finish_by`
    at START + `budget` s; returns the trainer, the steps played and the clock."""
    write_split_files(tmp_path)
    clock = Clock()
    monkeypatch.setattr(trainer_module, "TEST_FILE", tmp_path / "bfcl_test.parquet")
    monkeypatch.setattr(trainer_module, "time", clock)

    def timed_validate(self: SealPPOTrainer) -> dict[str, float]:
        metrics = scripted_validate(self)
        clock.now += TASK_S * len(self.loaders_played[-1])
        return metrics

    def step(self: SealPPOTrainer, metrics: dict, timing_raw: dict) -> SimpleNamespace:
        clock.now += STEP_S
        self.steps_played.append(self.global_steps)
        return SimpleNamespace(keys=[], partition_id="train")

    monkeypatch.setattr(trainer_base.PPOTrainer, "_validate", timed_validate)
    monkeypatch.setattr(trainer_base.PPOTrainer, "step", step)
    for name in ("_reissue_inflight_prompts", "_start_profiling", "_stop_profiling", "_compute_metrics"):
        monkeypatch.setattr(trainer_base.PPOTrainer, name, lambda self, *args, **kwargs: None)
    monkeypatch.setattr(trainer_base, "tq", SimpleNamespace(kv_clear=lambda keys, partition_id: None))

    def run(budget: float | None) -> tuple[SealPPOTrainer, Clock]:
        overrides = [
            "seal.test_after=true",
            "seal.rollout.env_backend=http",
            f"trainer.default_local_dir={tmp_path / 'run' / 'checkpoints'}",
            f"trainer.validation_data_dir={tmp_path / 'run' / 'validation'}",
            f"trainer.total_training_steps={PLANNED}",
            f"trainer.test_freq={PLANNED}",
            "trainer.save_freq=-1",
            "trainer.logger=[console]",
            "data.filter_overlong_prompts=false",  # the stand-in tokenizer spells prompts out
        ]
        if budget is not None:
            overrides.append(f"seal.finish_by={START + budget}")
        trainer = bare_trainer(
            compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", overrides), tmp_path, PLANNED
        )
        trainer.global_steps, trainer.steps_per_epoch, trainer.steps_played = 0, PLANNED, []
        trainer.checkpoint_manager = SimpleNamespace(update_weights=lambda step: None)
        trainer.fit(agent_loop_manager=None)
        return trainer, clock

    return run


def test_the_steps_end_early_enough_for_the_last_ones_validation_and_test_to_end_in_time(run_fit, tmp_path):
    budget = 400.0
    trainer, clock = run_fit(budget)
    # 20 s of validation, then steps of 40 s; the closing passes are 20 s of val and 60 s of test, the test
    # estimated from the validation, task for task (no test pass before the first step)
    assert trainer.finish_by.closing_s == pytest.approx(80.0)
    assert trainer.steps_played == [1, 2, 3, 4, 5, 6, 7]
    assert clock.now <= START + budget < clock.now + STEP_S  # over in time, and one more step would not be
    validated = sorted(p.name for p in (tmp_path / "run" / "validation").glob("*.jsonl"))
    assert validated == ["0.jsonl", "7.jsonl"]
    report = json.loads((tmp_path / "run" / "test_report.json").read_text())
    assert report["selection"]["best_step"] == report["selection"]["last_step"] == 7


def test_a_launch_already_late_plays_one_step_and_still_validates_and_tests_it(run_fit, tmp_path):
    trainer, clock = run_fit(60.0)  # after step 0's 20 s of validation, 40 s left: less than the closing 80
    assert trainer.steps_played == [1]
    assert clock.now == START + 20.0 + STEP_S + 80.0  # the least a run can do: one step, validated and tested
    assert sorted(p.name for p in (tmp_path / "run" / "validation").glob("*.jsonl")) == ["0.jsonl", "1.jsonl"]
    assert (tmp_path / "run" / "test" / "global_step_1" / "1.jsonl").is_file()


@pytest.mark.parametrize("budget", [None, 10_000.0], ids=["no finish_by", "a distant finish_by"])
def test_every_planned_step_runs_where_the_time_allows(run_fit, budget):
    trainer, _ = run_fit(budget)
    assert trainer.steps_played == list(range(1, PLANNED + 1))


def test_a_measured_test_pass_is_taken_as_it_is_and_one_not_played_is_scaled_from_the_validation():
    assert closing_seconds(16.0, None, 100, 300, validates=True, tests=True) == pytest.approx(64.0)
    assert closing_seconds(16.0, 50.0, 100, 300, validates=True, tests=True) == pytest.approx(66.0)
    assert closing_seconds(16.0, None, 100, 300, validates=True, tests=False) == pytest.approx(16.0)
    assert closing_seconds(16.0, None, 100, 300, validates=False, tests=False) == 0.0


def test_the_longest_step_so_far_sets_the_pace():
    finish = FinishBy(deadline=1_000.0, closing_s=100.0)
    assert not finish.first_step_is_last(0.0)
    assert not finish.next_step_is_last(300.0)  # a 300 s step: 300 + 600 + 100 = 1,000, just in time
    assert finish.next_step_is_last(310.0)  # a 10 s step, but the longest is 300 s: 310 + 600 + 100 > 1,000
    assert finish.longest_step_s == 300.0


@pytest.mark.parametrize(
    ("override", "says"),
    [
        ("trainer.val_before_train=false", "trainer.val_before_train=False: with seal.finish_by"),
        ("seal.finish_by=-1", "seal.finish_by must be a Unix time in seconds"),
    ],
    ids=["it times the closing passes on the validation before training", "a time, not a length"],
)
def test_a_finish_by_the_launch_cannot_keep_is_refused_before_anything_starts(override, says):
    config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", ["seal.finish_by=1900000000", override])
    with pytest.raises(ExperimentError, match=re.escape(says)):
        check_values(config)
