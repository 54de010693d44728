"""`seal.finish_by`: verl's own `fit` loop, with the steps, the clock, validation and saves scripted, ends its
steps early enough that the last one's validation, test pass and checkpoint are over by the set time, says
so in the run folder, and runs every step without it."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from verl.trainer.ppo.v1 import trainer_base

from seal.trainer.experiment import PROJECT_ROOT, ExperimentError, check_values, compose_experiment
from seal.trainer.launch.command import finished, mark_finished
from seal.trainer.rl import trainer as trainer_module
from seal.trainer.rl.closed_loop import ClosedLoop
from seal.trainer.rl.finish_by import ENDED_EARLY, FinishBy
from seal.trainer.rl.trainer import SealPPOTrainer
from tests.support.scripted_validation import bare_trainer, scripted_validate, write_split_files

PLANNED = 16
START = 1_000.0
STEP_S = 40.0
SAVE_S = 30.0
VAL_TASK_S = 0.2  # a validation of 100 tasks takes 20 s


class Clock:
    """Unix time and perf_counter at once, moved only by the scripted steps, validations and saves."""

    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now

    perf_counter = time


@pytest.fixture
def run_fit(tmp_path, monkeypatch):
    """Runs verl's `fit` for PLANNED steps of STEP_S s after step 0's validation, with `seal.finish_by` at
    START + `budget` s; a test task takes `test_task_s`. Returns the trainer (its `steps_played`) and the
    clock."""
    write_split_files(tmp_path)
    clock = Clock()
    monkeypatch.setattr(trainer_module, "TEST_FILE", tmp_path / "bfcl_test.parquet")
    monkeypatch.setattr(trainer_module, "time", clock)

    def step(self: SealPPOTrainer, metrics: dict, timing_raw: dict) -> SimpleNamespace:
        clock.now += STEP_S
        self.steps_played.append(self.global_steps)
        return SimpleNamespace(keys=[], partition_id="train")

    def save(self: SealPPOTrainer) -> None:
        clock.now += SAVE_S

    monkeypatch.setattr(trainer_base.PPOTrainer, "step", step)
    monkeypatch.setattr(trainer_base.PPOTrainer, "_save_checkpoint", save)
    for name in ("_reissue_inflight_prompts", "_start_profiling", "_stop_profiling", "_compute_metrics"):
        monkeypatch.setattr(trainer_base.PPOTrainer, name, lambda self, *args, **kwargs: None)
    monkeypatch.setattr(trainer_base, "tq", SimpleNamespace(kv_clear=lambda keys, partition_id: None))

    def run(
        budget: float | None, *overrides: str, test_task_s: float = VAL_TASK_S
    ) -> tuple[SealPPOTrainer, Clock]:
        def timed_validate(self: SealPPOTrainer) -> dict[str, float]:
            metrics = scripted_validate(self)
            played = len(self.loaders_played[-1])
            clock.now += (test_task_s if played == 300 else VAL_TASK_S) * played
            return metrics

        monkeypatch.setattr(trainer_base.PPOTrainer, "_validate", timed_validate)
        settings = [
            "seal.test_after=true",
            "seal.rollout.env_backend=http",
            f"trainer.default_local_dir={tmp_path / 'run' / 'checkpoints'}",
            f"trainer.validation_data_dir={tmp_path / 'run' / 'validation'}",
            f"trainer.total_training_steps={PLANNED}",
            f"trainer.test_freq={PLANNED}",
            "trainer.save_freq=-1",
            "trainer.logger=[console]",
            "data.filter_overlong_prompts=false",  # the stand-in tokenizer spells prompts out
            *([f"seal.finish_by={START + budget}"] if budget is not None else []),
            *overrides,
        ]
        config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", settings)
        trainer = bare_trainer(config, tmp_path, PLANNED)
        trainer.closed_loop = ClosedLoop(trainer.seal_settings)
        trainer.global_steps, trainer.steps_per_epoch, trainer.steps_played = 0, PLANNED, []
        trainer.checkpoint_manager = SimpleNamespace(update_weights=lambda step: None)
        trainer.fit(agent_loop_manager=None)
        return trainer, clock

    return run


def files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_the_steps_end_early_enough_for_the_last_ones_validation_and_test_to_end_in_time(run_fit, tmp_path):
    budget = 400.0
    trainer, clock = run_fit(budget)
    # 20 s of validation, then steps of 40 s; after the last, 20 s of val and 60 s of test, the test estimated
    # from the validation, task for task (no test pass before the first step)
    assert trainer.finish_by.closing_s() == pytest.approx(80.0)
    assert trainer.steps_played == [1, 2, 3, 4, 5, 6, 7]
    assert clock.now <= START + budget < clock.now + STEP_S  # over in time, and one more step would not be
    run = tmp_path / "run"
    assert files(run / "validation") == ["0.jsonl", "7.jsonl"]
    report = json.loads((run / "test_report.json").read_text())
    assert report["selection"]["best_step"] == report["selection"]["last_step"] == 7
    ended = json.loads((run / ENDED_EARLY).read_text())
    assert ended == {"last_step": 7, "planned_steps": PLANNED, "finish_by": START + budget}


def test_a_test_pass_before_the_first_step_times_the_closing_one(run_fit):
    # the test tasks take 0.3 s each: the pass before the first step takes 90 s, where an estimate from the
    # validation would say 60; with 60 the run would go on to step 7 and end at 1,500, past 1,480
    budget = 480.0
    trainer, clock = run_fit(budget, "seal.test_before=true", test_task_s=0.3)
    assert trainer.finish_by.test_s == pytest.approx(90.0)
    assert trainer.steps_played == [1, 2, 3, 4, 5, 6]
    assert clock.now <= START + budget


def test_the_checkpoint_the_last_step_saves_is_made_room_for(run_fit, tmp_path):
    # a save every 4 steps takes 30 s; unbudgeted, the run would go on to step 9 and end at 1,590, past 1,580
    budget = 580.0
    trainer, clock = run_fit(budget, "trainer.test_freq=4", "trainer.save_freq=4")
    assert trainer.finish_by.save_s == pytest.approx(SAVE_S)
    assert trainer.steps_played == list(range(1, 9))
    assert clock.now == START + 500.0 <= START + budget
    run = tmp_path / "run"
    assert files(run / "validation") == ["0.jsonl", "4.jsonl", "8.jsonl"]
    assert files(run / "checkpoints") == ["global_step_4", "global_step_8"]


def test_a_validation_due_after_the_step_is_made_room_for(run_fit, tmp_path):
    # every third step is validated (20 s); unbudgeted, the run would go on to step 5 and end at 1,320
    budget = 300.0
    trainer, clock = run_fit(budget, "trainer.test_freq=3")
    assert trainer.steps_played == [1, 2, 3, 4]
    assert clock.now == START + 280.0 <= START + budget
    assert files(tmp_path / "run" / "validation") == ["0.jsonl", "3.jsonl", "4.jsonl"]


def test_a_launch_already_late_plays_one_step_and_still_validates_and_tests_it(run_fit, tmp_path):
    trainer, clock = run_fit(200.0)  # after step 0's 20 s of validation: 180 s, less than 2 x 80 + 80
    assert trainer.steps_played == [1]
    assert clock.now == START + 20.0 + STEP_S + 80.0  # the least a run can do: one step, validated and tested
    assert files(tmp_path / "run" / "validation") == ["0.jsonl", "1.jsonl"]
    assert (tmp_path / "run" / "test" / "global_step_1" / "1.jsonl").is_file()


@pytest.mark.parametrize("budget", [None, 10_000.0], ids=["no finish_by", "a distant finish_by"])
def test_every_planned_step_runs_where_the_time_allows(run_fit, tmp_path, budget):
    trainer, _ = run_fit(budget)
    assert trainer.steps_played == list(range(1, PLANNED + 1))
    assert not (tmp_path / "run" / ENDED_EARLY).exists()


def test_a_run_that_ended_early_is_not_a_finished_one(tmp_path):
    config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", [])
    mark_finished(tmp_path, config)
    assert finished(tmp_path, config)
    (tmp_path / ENDED_EARLY).write_text(json.dumps({"last_step": 7}) + "\n")
    assert not finished(tmp_path, config)


def test_the_longest_step_so_far_sets_the_pace():
    finish = FinishBy(deadline=1_000.0, test_freq=0, tests=False, saves=False, val_s=100.0)
    assert finish.closing_s() == 0.0  # nothing follows the last step: no validation, test or save
    finish = FinishBy(deadline=1_000.0, test_freq=16, tests=False, saves=False, val_s=100.0)
    assert not finish.first_step_is_last(0.0)
    assert not finish.next_step_is_last(300.0, 1)  # a 300 s step: 300 + 600 + 100 = 1,000, just in time
    assert finish.next_step_is_last(
        310.0, 2
    )  # a 10 s step, but the longest is 300 s: 310 + 600 + 100 > 1,000
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
