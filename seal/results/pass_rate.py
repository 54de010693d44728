"""The paper's pass rate, computed in one place: per category the share of episodes whose reward is 1.0, and
"Avg", the unweighted mean of the categories' rates (docs/paper_results.md). `seal eval` and `seal diagnose`
summaries, the trainer's per-step and validation metrics, the checkpoint choice and `seal report` all call
`pass_rates`.

A validation pass is scored from verl's dump rows (`score_rows`): a task the trainer asked to validate and got
no row for (a failed rollout, which verl drops) is written into the dump as a `missing` row with score 0, so
it counts as a failure and is named, never dropped from the denominator.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from seal.bfcl.tasks import CATEGORIES, category_of

logger = logging.getLogger(__name__)

MISSING = "missing"
"""Dump field: true on the row written for a task that was to be validated but came back without a row."""


def passed(reward: float) -> bool:
    """An episode passes when BFCL's checker does: reward 1.0."""
    return reward >= 1.0


@dataclass(frozen=True)
class PassRates:
    """Per category (BFCL's order, then any other): its episodes, how many passed and the share that passed;
    `mean` is the shares' unweighted mean, the paper's "Avg" (0.0 with no episode)."""

    by_category: dict[str, float]
    counts: dict[str, int]
    passed: dict[str, int]
    mean: float

    @property
    def n(self) -> int:
        return sum(self.counts.values())


def pass_rates(outcomes: Iterable[tuple[str, float]]) -> PassRates:
    """The pass rates of (category, reward) pairs."""
    passes: dict[str, list[bool]] = {}
    for category, reward in outcomes:
        passes.setdefault(category, []).append(passed(reward))
    ordered = sorted(passes, key=category_order)
    by_category = {c: sum(passes[c]) / len(passes[c]) for c in ordered}
    mean = sum(by_category.values()) / len(by_category) if by_category else 0.0
    counts = {c: len(passes[c]) for c in ordered}
    return PassRates(by_category, counts, {c: sum(passes[c]) for c in ordered}, mean)


def category_order(category: str) -> tuple[int, str]:
    """BFCL's category order; a category it does not name comes after, alphabetically."""
    return (CATEGORIES.index(category) if category in CATEGORIES else len(CATEGORIES), category)


@dataclass(frozen=True)
class SplitScore:
    """Pass rates of one evaluation pass (one step's dump): per category, and their mean (the paper's Avg)."""

    step: int
    n: int
    by_category: dict[str, float]
    mean: float
    missing_task_ids: list[str] = field(default_factory=list)
    """Tasks without a validation row, counted as failed (in `n` and in their category's rate)."""


def missing_rows(expected: Iterable[str], present: Iterable[object]) -> list[dict[str, Any]]:
    """A `missing` row with score 0 for each `expected` task id that has no row among `present` ids."""
    seen = set(present)
    return [
        {"task_id": task_id, "category": category_of(task_id), "score": 0.0, MISSING: True}
        for task_id in dict.fromkeys(expected)
        if task_id not in seen
    ]


def score_rows(rows: Iterable[Mapping[str, Any]], step: int) -> SplitScore:
    """Pass rate per category and their mean over verl dump rows.

    A row's task id is its `task_id` field, else verl's `gts` (the dataset's ground truth is the task id);
    its category is its `category` field, else the task id's prefix. `missing` rows count as failures and
    are named in the score and in a warning.
    """
    outcomes: list[tuple[str, float]] = []
    missing: list[str] = []
    for row in rows:
        task_id = row.get("task_id") or row.get("gts")
        category = row.get("category") or (category_of(task_id) if isinstance(task_id, str) else None)
        score = row.get("score")
        if category is None or isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(
                f"step {step}: a dump row without task id/category or numeric score: {row!r:.200}"
            )
        outcomes.append((category, score))
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
    rates = pass_rates(outcomes)
    return SplitScore(step, rates.n, rates.by_category, rates.mean, missing)
