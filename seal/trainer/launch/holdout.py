"""The test half of the paper's protocol: select on val, then test the best-val and the last checkpoint.

`evaluate_test` sits above the trainer (the launcher calls it after training): it chooses the checkpoints
from the val dumps alone (`select_checkpoints`: the saved step with the highest val mean, the earliest on a
tie; it reads only those files and the checkpoint folders), runs verl's `val_only` pass on the
300 test tasks for each (`resume_mode=resume_path`) through `train`, each into its own folder under
`<run>/test/`, which selection never reads: test numbers cannot influence the choice. `seal.test_after`
instead tests the last step inside the training launch (SealPPOTrainer) and writes the same files.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seal.dataset import TEST_FILE
from seal.reports.runs import (
    CHECKPOINT_PREFIX,
    Selection,
    read_dump,
    validation_history,
    write_test_report,
)
from seal.results.pass_rate import SplitScore
from seal.trainer.experiment import train


def evaluate_test(
    config: DictConfig,
    run: Callable[[DictConfig], None] = train,
    test_files: Path = TEST_FILE,
) -> dict[str, Any]:
    """Select on val, evaluate the best-val and the last checkpoint on test, write and return the report.

    `config` is the training run's composed config; `run` executes one config. The report lands in
    `{checkpoints}/../test_report.json` (with each pass's `missing_task_ids`) and each pass's dump in
    `test/global_step_N/`.
    """
    checkpoint_dir = Path(config.trainer.default_local_dir)
    run_dir = checkpoint_dir.parent
    selection = select_checkpoints(Path(config.trainer.validation_data_dir), checkpoint_dir)
    scores: dict[int, SplitScore] = {}
    for step in sorted({selection.best_step, selection.last_step}):
        out_dir = run_dir / "test" / f"{CHECKPOINT_PREFIX}{step}"
        run(test_config(config, checkpoint_dir / f"{CHECKPOINT_PREFIX}{step}", out_dir, test_files))
        scores[step] = read_dump(out_dir / f"{step}.jsonl")
    return write_test_report(
        run_dir, selection, scores, "best val mean over saved checkpoints (earliest on a tie)"
    )


def checkpoint_steps(checkpoint_dir: Path) -> list[int]:
    """Steps that have a `global_step_N` folder in verl's checkpoint layout, ascending."""
    steps = []
    for folder in Path(checkpoint_dir).glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = folder.name.removeprefix(CHECKPOINT_PREFIX)
        if folder.is_dir() and suffix.isdigit():
            steps.append(int(suffix))
    return sorted(steps)


def select_checkpoints(validation_dir: Path, checkpoint_dir: Path) -> Selection:
    """Best saved checkpoint by val mean (earliest on a tie) and the last saved one. Reads val only."""
    history = validation_history(validation_dir)
    saved = checkpoint_steps(checkpoint_dir)
    if not saved:
        raise ValueError(f"no {CHECKPOINT_PREFIX}N folder in {checkpoint_dir}")
    candidates = [step for step in saved if step in history]
    if not candidates:
        raise ValueError(
            f"no saved checkpoint has a val result in {validation_dir} (set trainer.save_freq to a multiple "
            "of trainer.test_freq)"
        )
    best = max(candidates, key=lambda step: (history[step].mean, -step))
    return Selection(best, saved[-1], {step: history[step].mean for step in candidates})


def test_config(
    config: DictConfig, checkpoint: Path, out_dir: Path, test_files: Path = TEST_FILE
) -> DictConfig:
    """The config of verl's val_only pass of `checkpoint` on the test split, dumping into `out_dir`.

    Ω is left alone (test episodes run in eval mode and a training run may still use the service) and
    only the console logger is used, so the training run's curves are not mixed with test numbers.
    """
    test = copy.deepcopy(config)
    test.data.val_files = [str(test_files)]
    trainer = test.trainer
    trainer.val_only = True
    trainer.val_before_train = True
    trainer.resume_mode = "resume_path"
    trainer.resume_from_path = str(checkpoint)
    trainer.validation_data_dir = str(out_dir)
    trainer.logger = ["console"]
    test.seal.interface.adapt = False
    test.seal.test_after = False
    test.seal.test_before = False
    return test
