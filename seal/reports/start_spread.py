"""The starts of one SFT recipe side by side, by the GPU count they trained on, against the bar a start must
clear before RL from it says anything (issue 57): greedy val of at least `VAL_BAR`, a sampled mixed share of
at least `MIXED_BAR`, and a start that does not depend on the GPU count a researcher has: the GPU counts'
mean vals within `SPREAD_BAR` of each other. The means, not the farthest pair, because one config trained
again gives another start (bf16 reductions are not bit-deterministic) and 100 greedy episodes carry a
standard error of about 4 points at 18 %: the range of N such runs grows with N, so a bar on the farthest
pair fails any recipe once enough starts are measured. The range and the runs' spread within a GPU count
stand beside the means."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from seal.results.campaign import SftStart

VAL_BAR = 0.15
"""The greedy val on the 100 val tasks a start needs (the results page counts a seed's lines from it)."""
MIXED_BAR = 0.30
"""The share of the arms' train tasks whose 8 samples at T=1 must be mixed: the groups GRPO learns from."""
SPREAD_BAR = 0.05
"""How far apart the mean greedy vals of the recipe's starts on each GPU count may be."""


def recipe_starts(starts: Sequence[SftStart]) -> dict[str, list[SftStart]]:
    """The starts of each recipe run as shipped (a config without overrides), by recipe, in file order."""
    shipped: dict[str, list[SftStart]] = {}
    for start in starts:
        if " " not in start.recipe.strip():
            shipped.setdefault(start.recipe.strip(), []).append(start)
    return shipped


def _shares(values: Sequence[float], digits: int) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values) or "—"


def _starts(count: int) -> str:
    return f"{count} start" if count == 1 else f"{count} starts"


def by_gpus(starts: Sequence[SftStart]) -> dict[int, list[SftStart]]:
    """The starts by the GPU count they trained on, fewest GPUs first."""
    return {gpus: [s for s in starts if s.gpus == gpus] for gpus in sorted({s.gpus for s in starts})}


def spread_rows(starts: Sequence[SftStart]) -> list[dict[str, str]]:
    """One row per GPU count: each start's greedy val and, where measured, its sampled mixed share."""
    rows = []
    for gpus, members in by_gpus(starts).items():
        vals = [100 * s.val for s in members]
        mixed = [s.mixed for s in members if s.mixed is not None]
        rows.append(
            {
                "GPUs": str(gpus),
                "starts": str(len(members)),
                "greedy val, each": _shares(vals, 1),
                "mean": f"{statistics.fmean(vals):.1f}",
                "mixed, where measured": _shares(mixed, 2),
            }
        )
    return rows


def within_sd(starts: Sequence[SftStart]) -> float | None:
    """The pooled standard deviation of the vals within each GPU count: how far one config run again on the
    same GPUs moves its start; None without two starts on one count."""
    groups = [[s.val for s in members] for members in by_gpus(starts).values()]
    freedom = sum(len(vals) - 1 for vals in groups)
    if freedom == 0:
        return None
    return math.sqrt(
        sum(statistics.variance(vals) * (len(vals) - 1) for vals in groups if len(vals) > 1) / freedom
    )


def spread_verdict(recipe: str, starts: Sequence[SftStart]) -> str:
    """One sentence: which parts of the bar the recipe's starts clear, with the numbers that decide it."""
    vals = [s.val for s in starts]
    low = [s for s in starts if s.val < VAL_BAR]
    measured = [s.mixed for s in starts if s.mixed is not None]
    below_mixed = [m for m in measured if m < MIXED_BAR]
    groups = by_gpus(starts)
    means = {gpus: statistics.fmean(s.val for s in members) for gpus, members in groups.items()}
    apart = max(means.values()) - min(means.values())
    val_part = (
        f"every greedy val is {100 * VAL_BAR:.0f} % or more"
        if not low
        else f"{len(low)} of {len(starts)} greedy vals are below {100 * VAL_BAR:.0f} %"
    )
    mixed_part = (
        "no mixed share is measured"
        if not measured
        else f"{len(measured) - len(below_mixed)} of the {len(measured)} mixed shares measured are "
        f"{MIXED_BAR:.2f} or more ({len(starts) - len(measured)} not measured)"
    )
    mean_part = (
        "the mean vals by GPU count are "
        + " and ".join(f"{100 * means[g]:.1f} on {g} GPU(s) ({_starts(len(groups[g]))})" for g in means)
        + f", {100 * apart:.1f} points apart "
        f"({'within' if apart <= SPREAD_BAR + 1e-9 else 'beyond'} the {100 * SPREAD_BAR:.0f} allowed)"
        if len(means) > 1
        else f"every start trained on {next(iter(means))} GPU(s): no GPU counts to compare"
    )
    sd = within_sd(starts)
    range_part = f"single starts range {100 * min(vals):.1f}–{100 * max(vals):.1f}" + (
        f", a standard deviation of {100 * sd:.1f} points within a GPU count" if sd is not None else ""
    )
    return f"`{recipe}`, {len(starts)} starts: {val_part}; {mixed_part}; {mean_part}; {range_part}."
