"""How many steps a run does, counted as verl 0.9.1's trainer counts them (`_init_dataloader` and `fit`
of `PPOTrainer`).

The train set is the rows of `data.train_files`, cut to `data.train_max_samples` of them when that is
positive and smaller (drawn at random under `data.shuffle`, seeded by `data.seed`). An epoch is
`rows // data.train_batch_size` steps: the dataloader drops the last, partial batch (`drop_last=True`),
so `rows % batch` rows sit out each epoch. The run stops after
`trainer.total_training_steps` steps when that is set, and in any case once `trainer.total_epochs` epochs
are done: `fit` loops while `epoch < total_epochs and step <= total_training_steps`, so a
`total_training_steps` beyond `steps_per_epoch * total_epochs` is never reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
from omegaconf import DictConfig

from seal.bfcl.tasks import split_ids


@dataclass(frozen=True)
class RunLength:
    all_rows: int
    """Rows of `data.train_files`."""
    rows: int
    """Train rows the dataloader reads (after `data.train_max_samples`)."""
    batch: int
    epochs: int
    asked_steps: int | None
    """`trainer.total_training_steps` (None: as many as the epochs hold)."""

    @property
    def is_cut(self) -> bool:
        return self.rows < self.all_rows

    @property
    def steps_per_epoch(self) -> int:
        return self.rows // self.batch

    @property
    def unused_rows(self) -> int:
        """Rows of each epoch that no batch holds (drop_last)."""
        return self.rows - self.steps_per_epoch * self.batch

    @property
    def epoch_steps(self) -> int:
        """The steps `trainer.total_epochs` epochs hold."""
        return self.steps_per_epoch * self.epochs

    @property
    def steps(self) -> int:
        """The steps the run does."""
        return self.epoch_steps if self.asked_steps is None else min(self.asked_steps, self.epoch_steps)

    @property
    def epochs_needed(self) -> int:
        """The `trainer.total_epochs` that lets the run reach `total_training_steps`."""
        wanted = self.asked_steps if self.asked_steps is not None else self.epoch_steps
        return math.ceil(wanted / self.steps_per_epoch) if self.steps_per_epoch else 0

    def describe(self) -> str:
        """The plan's epochs value, e.g. `6 (12 steps per epoch of 400 train rows, 16 unused each epoch;
        72 steps)`."""
        cut = f" (data.train_max_samples of {self.all_rows})" if self.is_cut else ""
        unused = f", {self.unused_rows} unused each epoch" if self.unused_rows else ""
        capped = ": trainer.total_training_steps" if self.asked_steps is not None else ""
        return (
            f"{self.epochs} ({self.steps_per_epoch} steps per epoch of {self.rows} train rows{cut}{unused}; "
            f"{self.steps} steps{capped})"
        )


def run_length(config: DictConfig) -> RunLength:
    """The run length of a composed RL config whose batch, epochs and steps are checked integers."""
    trainer, all_rows = config.trainer, file_rows(config)
    limit = config.data.get("train_max_samples", -1)
    return RunLength(
        all_rows=all_rows,
        rows=min(all_rows, limit) if isinstance(limit, int) and limit > 0 else all_rows,
        batch=int(config.data.train_batch_size),
        epochs=int(trainer.total_epochs),
        asked_steps=None if trainer.total_training_steps is None else int(trainer.total_training_steps),
    )


def file_rows(config: DictConfig) -> int:
    """Rows of `data.train_files` (a missing file counts as the train split it is built from)."""
    files = config.data.train_files
    paths = [Path(files)] if isinstance(files, str) else [Path(path) for path in files]
    return sum(
        pq.ParquetFile(path).metadata.num_rows if path.is_file() else len(split_ids("train"))
        for path in paths
    )
