"""Why an arm's scores moved or did not, from its per-step metrics: how much room the policy had to change
(entropy), how far each update moved it (PPO's clip fraction and KL, the gradient norm), which way the scaled
update pushed (`seal/advantage/net_share`, logged since commit 06fedbb), how many sampled episodes a limit
cut and how many of those an update could push down (in a mixed group: `seal/groups/cut_in_mixed_share`,
logged after the 1.5B's seed 1) and what the episodes became (turns and response tokens). Each is the mean
over the first quarter of the steps against the mean over the last, so that a drift shows without a plot."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from seal.reports.compare import quarters

SIGNALS = {
    "entropy": ("actor/entropy", ".3f"),
    "clip fraction": ("actor/pg_clipfrac", ".2g"),
    "PPO KL": ("actor/ppo_kl", ".2g"),
    "grad norm": ("actor/grad_norm", ".2f"),
    "net share": ("seal/advantage/net_share", ".2f"),
    "cut episodes": ("seal/truncated_share", ".2f"),
    "cut in mixed groups": ("seal/groups/cut_in_mixed_share", ".2f"),
    "turns an episode": ("num_turns/mean", ".1f"),
    "response tokens": ("response_length/mean", ".0f"),
}
"""Column: the metric it reads (verl's, and SEAL's net share) and the format it is shown in."""


def span(steps: pd.Index) -> str:
    first, last = int(steps.min()), int(steps.max())
    return str(first) if first == last else f"{first}–{last}"


def drift(first: pd.DataFrame, last: pd.DataFrame, metric: str, shown: str) -> str:
    """'mean over the first quarter → mean over the last', or — where the metric was not logged."""
    if metric not in first or metric not in last:
        return "—"
    before, after = first[metric].dropna(), last[metric].dropna()
    if before.empty or after.empty:
        return "—"
    return f"{before.mean():{shown}} → {after.mean():{shown}}"


def signal_rows(sittings: Sequence[tuple[str, int, pd.DataFrame]]) -> list[dict[str, str]]:
    """One row per sitting (arm name, seed, its per-step metrics): each signal's drift over its steps."""
    rows = []
    for arm, seed, steps in sittings:
        if steps.empty:
            continue
        first, last = quarters(steps)
        row = {"arm": arm, "seed": str(seed), "steps": f"{span(first.index)} → {span(last.index)}"}
        drifts = {name: drift(first, last, metric, shown) for name, (metric, shown) in SIGNALS.items()}
        rows.append(row | drifts)
    return rows
