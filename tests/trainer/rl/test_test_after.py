"""`seal.test_after`: the last step's validation is followed, in the same launch, by one greedy pass over the
test split, dumped and reported where `--test` puts a checkpoint's; `seal.test_before`: the validation before
the first step is followed by one too, dumped at step 0 and not reported; with the options off nothing of
them runs.

verl's own validation pass needs GPUs: `tests.support.scripted_validation` stands in for it."""

from __future__ import annotations

import json
import re

import pytest
from verl.trainer.ppo.v1 import trainer_base

from seal.bfcl.tasks import split_ids
from seal.reports import runs
from seal.trainer.experiment import PROJECT_ROOT, ExperimentError, check_values, compose_experiment
from seal.trainer.rl import trainer as trainer_module
from seal.trainer.rl.trainer import TEST_AFTER_RULE, SealPPOTrainer
from tests.support.scripted_validation import (
    bare_trainer,
    expected_mean,
    scripted_validate,
    write_split_files,
)

STEPS = 3
TEST_FREQ = 2  # validations at steps 0, 2 and 3 (verl validates the last step too)


@pytest.fixture
def make_trainer(tmp_path, monkeypatch):
    write_split_files(tmp_path)
    monkeypatch.setattr(trainer_module, "TEST_FILE", tmp_path / "bfcl_test.parquet")
    monkeypatch.setattr(trainer_base.PPOTrainer, "_validate", scripted_validate)

    def make(test_after: bool, test_before: bool = False) -> SealPPOTrainer:
        config = compose_experiment(
            PROJECT_ROOT / "exp" / "SEAL.yaml",
            [
                f"seal.test_after={str(test_after).lower()}",
                f"seal.test_before={str(test_before).lower()}",
                f"trainer.default_local_dir={tmp_path / 'run' / 'checkpoints'}",
                f"trainer.validation_data_dir={tmp_path / 'run' / 'validation'}",
                f"trainer.test_freq={TEST_FREQ}",
                "data.filter_overlong_prompts=false",  # the stand-in tokenizer spells prompts out
            ],
        )
        return bare_trainer(config, tmp_path, STEPS)

    return make


def validations_of_a_run(trainer: SealPPOTrainer) -> list[dict[str, float]]:
    """The validations verl's `fit` runs: before training, every TEST_FREQ steps and at the last step."""
    trainer.global_steps = 0
    metrics = [trainer._validate()]
    for step in range(1, STEPS + 1):
        trainer.global_steps = step
        if step % TEST_FREQ == 0 or step == STEPS:
            metrics.append(trainer._validate())
    trainer._shutdown_dump_executor()
    return metrics


def test_the_test_split_is_played_once_after_the_last_validation(make_trainer, tmp_path):
    trainer = make_trainer(test_after=True)
    val_loader = trainer.val_dataloader
    metrics = validations_of_a_run(trainer)

    played = trainer.loaders_played
    assert len(played) == 4  # val at 0, 2 and 3, then test
    assert all(sorted(ids) == sorted(split_ids("val")) for ids in played[:3])
    assert sorted(played[3]) == sorted(split_ids("test"))
    assert trainer.val_dataloader is val_loader  # the val set is the val set again
    assert trainer.config.trainer.validation_data_dir == str(tmp_path / "run" / "validation")

    last = metrics[-1]
    assert last["val-core/seal/pass_rate_mean"] == pytest.approx(expected_mean("val"))
    assert last["test/seal/pass_rate_mean"] == pytest.approx(expected_mean("test"))
    assert last["test/seal/missing_rows"] == 0.0
    assert last["timing_s/test"] >= 0.0
    assert not any(key.startswith("test/") for m in metrics[:-1] for key in m)

    run = tmp_path / "run"
    dump = [
        json.loads(line) for line in (run / "test" / "global_step_3" / "3.jsonl").read_text().splitlines()
    ]
    assert len(dump) == 300 and {row["split"] for row in dump} == {"test"}
    report = json.loads((run / "test_report.json").read_text())
    assert report["selection"] == {
        "rule": TEST_AFTER_RULE,
        "best_step": STEPS,
        "last_step": STEPS,
        "val_mean": {"3": pytest.approx(expected_mean("val"))},
    }
    best = dict(runs.test_scores(run))["best"]  # what `seal report` and the comparison read
    assert best.n == 300 and best.mean == pytest.approx(expected_mean("test"))
    assert sorted(p.name for p in (run / "validation").glob("*.jsonl")) == ["0.jsonl", "2.jsonl", "3.jsonl"]


def test_without_the_option_no_test_pass_runs(make_trainer, tmp_path):
    trainer = make_trainer(test_after=False)
    metrics = validations_of_a_run(trainer)
    assert len(trainer.loaders_played) == 3
    assert not any(key.startswith("test/") for m in metrics for key in m)
    assert not (tmp_path / "run" / "test").exists() and not (tmp_path / "run" / "test_report.json").exists()


def test_before_and_after_the_test_split_is_played_once_each_and_only_the_last_is_reported(
    make_trainer, tmp_path
):
    trainer = make_trainer(test_after=True, test_before=True)
    metrics = validations_of_a_run(trainer)

    played = trainer.loaders_played
    assert len(played) == 5  # val at 0, then test, val at 2 and 3, then test
    assert [sorted(ids) == sorted(split_ids("test")) for ids in played] == [False, True, False, False, True]
    first, middle, last = metrics[0], metrics[1], metrics[-1]
    assert first["test/seal/pass_rate_mean"] == pytest.approx(expected_mean("test"))
    assert (
        first["timing_s/test"] >= 0.0
        and last["test/seal/pass_rate_mean"] == first["test/seal/pass_rate_mean"]
    )
    assert not any(key.startswith("test/") for key in middle)

    run = tmp_path / "run"
    before = runs.read_dump(run / "test" / "global_step_0" / "0.jsonl")
    assert before.n == 300 and before.mean == pytest.approx(expected_mean("test"))
    report = json.loads((run / "test_report.json").read_text())
    assert report["selection"]["best_step"] == report["selection"]["last_step"] == STEPS
    assert sorted(p.name for p in (run / "validation").glob("*.jsonl")) == ["0.jsonl", "2.jsonl", "3.jsonl"]


def test_a_test_before_alone_writes_no_report_and_a_resumed_launch_tests_nothing_before(
    make_trainer, tmp_path
):
    trainer = make_trainer(test_after=False, test_before=True)
    trainer.global_steps = 2  # verl's validation before training, in a launch resumed at step 2
    assert not any(key.startswith("test/") for key in trainer._validate())
    metrics = validations_of_a_run(trainer)
    assert [key for key in metrics[0] if key.startswith("test/seal/pass_rate_mean")]
    assert not any(key.startswith("test/") for m in metrics[1:] for key in m)
    assert (tmp_path / "run" / "test" / "global_step_0" / "0.jsonl").is_file()
    assert not (tmp_path / "run" / "test_report.json").exists()


@pytest.mark.parametrize(
    ("option", "bad", "good", "says"),
    [
        (
            "test_after",
            "trainer.test_freq=-1",
            ("test_freq", 8),
            "trainer.test_freq=-1: with seal.test_after",
        ),
        (
            "test_before",
            "trainer.val_before_train=false",
            ("val_before_train", True),
            "trainer.val_before_train=False: with seal.test_before",
        ),
    ],
    ids=["after needs a validated last step", "before needs the validation before training"],
)
def test_each_option_needs_the_validation_its_pass_follows(option, bad, good, says):
    config = compose_experiment(PROJECT_ROOT / "exp" / "SEAL.yaml", [f"seal.{option}=true", bad])
    with pytest.raises(ExperimentError, match=re.escape(says)):
        check_values(config)
    config.trainer[good[0]] = good[1]
    assert getattr(check_values(config), option)
