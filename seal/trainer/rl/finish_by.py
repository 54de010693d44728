"""`seal.finish_by`: a launch that must be over by a set time ends its steps early rather than mid-step.

On a cluster whose jobs end at a fixed time, a launch the limit stops leaves no held-out score: its last
validation and test pass never ran and, with no checkpoint saved, nothing resumes it. Ending a few steps
early keeps them, so the run counts, with the steps it ran. verl decides a step is its last when the step
begins (`is_last_step`, from `total_training_steps`), so the decision is taken one step ahead: at the end of
each step, from the longest step so far and the closing passes, as long as the same passes took before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omegaconf import DictConfig

ENDED_EARLY = "ended_early.json"
"""Written in the run folder when `seal.finish_by` made a step before the planned last the last: such a run
is not a finished one (seal/trainer/launch/command.py `finished`), so a resumed launch trains on."""


@dataclass
class FinishBy:
    """The time a launch must be over by, what follows its last step, and the pace it has measured so far
    (seconds; times are Unix)."""

    deadline: float
    test_freq: int
    """verl's `trainer.test_freq`: the steps it divides are validated, and so is the last (0: none is)."""
    tests: bool
    """Whether a test pass follows the last validation (`seal.test_after`)."""
    saves: bool
    """Whether the last step saves a checkpoint (`trainer.save_freq > 0`)."""
    val_s: float | None = None
    """The first validation's seconds (None until it has run)."""
    test_s: float = 0.0
    """The test pass's: as the one before the first step took, else estimated from the validation."""
    save_s: float = 0.0
    """The longest checkpoint save so far (0 until one has run)."""
    longest_step_s: float = 0.0
    step_began: float | None = None

    def timed_first_validation(
        self, val_s: float, test_s: float | None, val_tasks: int, test_tasks: int
    ) -> None:
        """The launch's first validation, and the test pass where one followed it; a test pass not played
        yet is estimated from the validation, task for task."""
        self.val_s = val_s
        self.test_s = test_s if test_s is not None else val_s * test_tasks / max(val_tasks, 1)

    @property
    def validates(self) -> bool:
        return self.test_freq >= 1

    def saved(self, seconds: float) -> None:
        self.save_s = max(self.save_s, seconds)

    def closing_s(self) -> float:
        """What follows the last step's own work: its validation, the test pass and its checkpoint."""
        return (
            ((self.val_s or 0.0) if self.validates else 0.0)
            + (self.test_s if self.tests else 0.0)
            + (self.save_s if self.saves else 0.0)
        )

    def first_step_is_last(self, now: float) -> bool:
        """At the first step's start: whether it must be the last. No step has been timed, so a step is
        taken as long as the closing passes; the run would otherwise end, at the latest, after this step, a
        last one and the closing passes."""
        self.step_began = now
        closing = self.closing_s()
        step_guess = closing
        return now + 2 * step_guess + closing > self.deadline

    def next_step_is_last(self, now: float, step: int) -> bool:
        """At the end of `step` (before verl validates it, where `test_freq` divides it): whether the next
        must be the last, where that validation, one more step after the next (each as long as the longest
        so far) and the closing passes would end past the deadline."""
        if self.step_began is not None:
            self.longest_step_s = max(self.longest_step_s, now - self.step_began)
        self.step_began = now
        pending = (self.val_s or 0.0) if self.validates and step % self.test_freq == 0 else 0.0
        return now + pending + 2 * self.longest_step_s + self.closing_s() > self.deadline


def finish_by_of(config: DictConfig, deadline: float | None) -> FinishBy | None:
    """The launch's FinishBy where `seal.finish_by` is set (`deadline`), shaped by its trainer config."""
    if deadline is None:
        return None
    test_freq, save_freq = config.trainer.test_freq, config.trainer.save_freq
    return FinishBy(
        deadline,
        test_freq=test_freq if type(test_freq) is int and test_freq >= 1 else 0,
        tests=bool(config.seal.test_after),
        saves=type(save_freq) is int and save_freq > 0,
    )


def write_ended_early(run_dir: Path, last_step: int, planned: int, deadline: float) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"last_step": last_step, "planned_steps": planned, "finish_by": deadline}
    (run_dir / ENDED_EARLY).write_text(json.dumps(record) + "\n")


def planned_steps(run_dir: Path) -> int | None:
    """The steps planned for a run `seal.finish_by` ended before them; None for a run that ran them all."""
    record = run_dir / ENDED_EARLY
    return json.loads(record.read_text())["planned_steps"] if record.is_file() else None
