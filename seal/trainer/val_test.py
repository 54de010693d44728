"""Scoring of the paper's val/test protocol: pass rates of a validation pass, and the checkpoint choice.

During training verl validates on `data.val_files` (the 100 val tasks) before training and every
`trainer.test_freq` steps and dumps `{validation_data_dir}/{step}.jsonl`. `select_checkpoints` reads only
those files and the checkpoint folders: the best checkpoint is the saved step with the highest val mean
(the mean of the four per-category pass rates; the earliest step wins a tie). A task the trainer asked
to validate and got no row for (a failed rollout, which verl drops) is written into the dump as a
`missing` row with score 0, so it counts as a failure and is named, never dropped from the denominator.
`seal.trainer.test_protocol` runs the test passes on top of this module.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seal.bfcl.tasks import CATEGORIES, SPLITS, category_of, split_ids
from seal.dataset import DATA_DIR
from seal.jsonl import JsonLinesError, json_objects

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "global_step_"
TEST_FILE = DATA_DIR / "bfcl_test.parquet"
REPORT_NAME = "test_report.json"
MISSING = "missing"
"""Dump field: true on the row written for a task that was to be validated but came back without a row."""


@dataclass(frozen=True)
class SplitScore:
    """Pass rates of one evaluation pass (one step's dump): per category, and their mean (the paper's Avg)."""

    step: int
    n: int
    by_category: dict[str, float]
    mean: float
    missing_task_ids: list[str] = field(default_factory=list)
    """Tasks without a validation row, counted as failed (in `n` and in their category's rate)."""


@dataclass(frozen=True)
class Selection:
    """Which checkpoints to report, and the val means they were chosen from (step -> mean)."""

    best_step: int
    last_step: int
    val_mean: dict[int, float]


def missing_rows(expected: Iterable[str], present: Iterable[object]) -> list[dict[str, Any]]:
    """A `missing` row with score 0 for each `expected` task id that has no row among `present` ids."""
    seen = set(present)
    return [
        {"task_id": task_id, "category": category_of(task_id), "score": 0.0, MISSING: True}
        for task_id in dict.fromkeys(expected)
        if task_id not in seen
    ]


def score_rows(rows: Iterable[Mapping[str, Any]], step: int) -> SplitScore:
    """Pass rate per category (reward 1.0 is a pass) and their unweighted mean, over verl dump rows.

    A row's task id is its `task_id` field, else verl's `gts` (the dataset's ground truth is the task id);
    its category is its `category` field, else the task id's prefix. `missing` rows count as failures and
    are named in the score and in a warning.
    """
    outcomes: dict[str, list[float]] = {}
    missing: list[str] = []
    for row in rows:
        task_id = row.get("task_id") or row.get("gts")
        category = row.get("category") or (category_of(task_id) if isinstance(task_id, str) else None)
        score = row.get("score")
        if category is None or isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(
                f"step {step}: a dump row without task id/category or numeric score: {row!r:.200}"
            )
        outcomes.setdefault(category, []).append(1.0 if score >= 1.0 else 0.0)
        if row.get(MISSING):
            missing.append(str(task_id))
    if not outcomes:
        raise ValueError(f"step {step}: no validation rows")
    if missing:
        logger.warning(
            "step %s: %d task(s) came back without a validation row and count as failed: %s",
            step,
            len(missing),
            ", ".join(missing),
        )
    by_category = {
        c: sum(v) / len(v) for c, v in sorted(outcomes.items(), key=lambda kv: _category_order(kv[0]))
    }
    return SplitScore(
        step,
        sum(map(len, outcomes.values())),
        by_category,
        sum(by_category.values()) / len(by_category),
        missing,
    )


@cache
def _split_by_task() -> dict[str, str]:
    return {task_id: split for split in SPLITS for task_id in split_ids(split)}


def split_of(task_id: object) -> str:
    """`train`, `val` or `test` for a task id of the split; "" for anything else."""
    return _split_by_task().get(task_id, "") if isinstance(task_id, str) else ""


def dump_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one `{step}.jsonl` dump, each checked: a JSON object with a task id (`task_id` or
    `gts`), a finite numeric score, and the only row of its task. Anything else is a `JsonLinesError`
    naming the file and line, never a row miscounted (a NaN score as a failure, a repeated row twice)."""
    rows: list[dict[str, Any]] = []
    first_line: dict[str, str] = {}
    for where, row in json_objects(path):
        task_id, score = row.get("task_id") or row.get("gts"), row.get("score")
        if not isinstance(task_id, str):
            raise JsonLinesError(f"{where}: a dump row needs a task id ('task_id' or 'gts')")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise JsonLinesError(f"{where}: the score of {task_id} is {score!r}, not a finite number")
        if task_id in first_line:
            raise JsonLinesError(
                f"{where}: a second row for {task_id} (the first is at {first_line[task_id]}); "
                "a dump holds one row per task"
            )
        first_line[task_id] = where
        rows.append(row)
    return rows


def read_dump(path: Path) -> SplitScore:
    """Score one `{step}.jsonl` dump written by verl's `_validate`."""
    return score_rows(dump_rows(path), int(path.stem))


def validation_history(validation_dir: Path) -> dict[int, SplitScore]:
    """Every step's val score in `validation_dir` ({step}.jsonl files), by step."""
    dumps = sorted(
        Path(validation_dir).glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1
    )
    return {score.step: score for score in (read_dump(p) for p in dumps if p.stem.isdigit())}


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
    return test


def _category_order(category: str) -> tuple[int, str]:
    return (CATEGORIES.index(category) if category in CATEGORIES else len(CATEGORIES), category)
