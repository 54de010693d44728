"""The starts of one SFT recipe side by side, by the GPU count they trained on, against the bar a start must
clear before RL from it says anything (issue 57): greedy val of at least `VAL_BAR`, a sampled mixed share of
at least `MIXED_BAR`, and vals within `SPREAD_BAR` of each other, so that the GPU count a researcher has does
not change the start. The farthest pair is checked as the bar asks, and the GPU counts' means beside it: 100
greedy episodes carry a standard error of about 4 points at 18 %, so two draws of one start can be 5 points
apart."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from seal.results.campaign import SftStart

VAL_BAR = 0.15
"""The greedy val on the 100 val tasks a start needs (the results page counts a seed's lines from it)."""
MIXED_BAR = 0.30
"""The share of the arms' train tasks whose 8 samples at T=1 must be mixed: the groups GRPO learns from."""
SPREAD_BAR = 0.05
"""How far apart the greedy vals of the recipe's starts may be, whatever GPU count each trained on."""


def recipe_starts(starts: Sequence[SftStart]) -> dict[str, list[SftStart]]:
    """The starts of each recipe run as shipped (a config without overrides), by recipe, in file order."""
    shipped: dict[str, list[SftStart]] = {}
    for start in starts:
        if " " not in start.recipe.strip():
            shipped.setdefault(start.recipe.strip(), []).append(start)
    return shipped


def _shares(values: Sequence[float], digits: int) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values) or "—"


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


def spread_verdict(recipe: str, starts: Sequence[SftStart]) -> str:
    """One sentence: which parts of the bar the recipe's starts clear, with the numbers that decide it."""
    vals = [s.val for s in starts]
    low = [s for s in starts if s.val < VAL_BAR]
    measured = [s.mixed for s in starts if s.mixed is not None]
    below_mixed = [m for m in measured if m < MIXED_BAR]
    widest = max(vals) - min(vals)
    means = {gpus: statistics.fmean(s.val for s in members) for gpus, members in by_gpus(starts).items()}
    apart = max(means.values()) - min(means.values())
    counts = " and ".join(str(g) for g in means)
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
    spread_part = (
        f"the farthest two vals are {100 * widest:.1f} points apart "
        f"({'within' if widest <= SPREAD_BAR + 1e-9 else 'beyond'} the {100 * SPREAD_BAR:.0f} allowed)"
    )
    mean_part = (
        f"the means on {counts} GPUs are "
        + " and ".join(f"{100 * m:.1f}" for m in means.values())
        + f", {100 * apart:.1f} points apart"
        if len(means) > 1
        else f"every start trained on {counts} GPU(s)"
    )
    return f"`{recipe}`, {len(starts)} starts: {val_part}; {mixed_part}; {spread_part}; {mean_part}."
