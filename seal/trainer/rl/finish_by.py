"""`seal.finish_by`: a launch that must be over by a set time ends its steps early rather than mid-step.

On a cluster whose jobs end at a fixed time, a launch the limit stops leaves no held-out score: its last
validation and test pass never ran and, with no checkpoint saved, nothing resumes it. Ending a few steps
early keeps them, so the run counts, with the steps it ran. verl decides a step is its last when the step
begins (`is_last_step`, from `total_training_steps`), so the decision is taken one step ahead: at the end of
each step, from the longest step so far and what the closing validation and test pass took at the start.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FinishBy:
    """The time a launch must be over by, and the pace it has measured so far (seconds; times are Unix)."""

    deadline: float
    closing_s: float | None = None
    """The validation and test pass that follow the last step, as long as those at the start took (None
    until the first validation has been timed)."""
    longest_step_s: float = 0.0
    step_began: float | None = None

    def first_step_is_last(self, now: float) -> bool:
        """At the first step's start: whether it must be the last, where even the closing passes would end
        past the deadline after it."""
        self.step_began = now
        return now + (self.closing_s or 0.0) >= self.deadline

    def next_step_is_last(self, now: float) -> bool:
        """At a step's end: whether the next must be the last, where one more step after it (each as long as
        the longest so far) and the closing passes would end past the deadline."""
        if self.step_began is not None:
            self.longest_step_s = max(self.longest_step_s, now - self.step_began)
        self.step_began = now
        return now + 2 * self.longest_step_s + (self.closing_s or 0.0) > self.deadline


def closing_seconds(
    val_s: float, test_s: float | None, val_tasks: int, test_tasks: int, validates: bool, tests: bool
) -> float:
    """The closing passes' seconds from the first validation's (`val_s`) and, where the launch played one
    before the first step, the test pass's (`test_s`); a test pass not played yet is estimated from the
    validation, task for task."""
    if test_s is None:
        test_s = val_s * test_tasks / max(val_tasks, 1)
    return (val_s if validates else 0.0) + (test_s if tests else 0.0)
