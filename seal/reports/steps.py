"""Per-step table of a training run: where each step's time went and what SEAL did in it.

    python scripts/step_table.py experiments/smoke_gpu [experiments/smoke_gpu_vanilla]

Reads verl's metrics of every launch of the run (`RUN/metrics/*.jsonl`, written by verl's `file` logger; the
launcher gives each launch its own file) and prints, per training step, verl's phase timings, SEAL's own
timings, the tokens, throughput and actor MFU, the environment and generation seconds of the trajectories,
what says whether the run learns (the reward mean, the share of GRPO groups with mixed rewards: only those
carry an advantage), the A-Patch factor's min / mean / max, Ω's version, the label shares and ρ per label.
A second table per run tells a learning run from a broken one: the rollout-vs-trainer agreement (verl's
`training/rollout_probs_diff_mean`, `training/rollout_actor_probs_pearson_corr`, `rollout_corr/k3_kl`),
`actor/entropy`, `actor/grad_norm`, the share of episodes cut by each limit (context, calls, generation),
the share whose trained response was cut, and verl's `response_length/clip_ratio`.
With two runs it also prints their reward and mixed-group share side by side, step by step, and compares
their median step times over the steps after the first (the first holds compilation and warm-up), phase by
phase.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from seal.reports.compare import read_steps

COLUMNS = {
    "step s": "timing_s/step",
    "gen": "timing_s/gen",
    "old_log_prob": "timing_s/old_log_prob",
    "ref": "timing_s/ref",
    "adv": "timing_s/adv",
    "update_actor": "timing_s/update_actor",
    "update_weights": "timing_s/update_weights",
    "seal_apatch": "timing_s/seal_apatch",
    "seal_evolve": "timing_s/seal_evolve",
    "tokens": "perf/total_num_tokens",
    "tokens/s/GPU": "perf/throughput",
    "MFU": "perf/mfu/actor",
    "env s/traj": "seal/env_seconds/mean",
    "gen s/traj": "seal/gen_seconds/mean",
    "reward": "seal/reward/mean",
    "mixed groups": "seal/groups/mixed_share",
    "truncated": "seal/truncated_share",
    "apatch min": "seal/apatch/scale_min",
    "apatch mean": "seal/apatch/scale_mean",
    "apatch max": "seal/apatch/scale_max",
    "Ω version": "seal/interface/version",
}
HEALTH = {
    "reward": "seal/reward/mean",
    "mixed groups": "seal/groups/mixed_share",
    "probs diff": "training/rollout_probs_diff_mean",
    "probs corr": "training/rollout_actor_probs_pearson_corr",
    "rollout KL": "rollout_corr/k3_kl",
    "entropy": "actor/entropy",
    "grad norm": "actor/grad_norm",
    "update skipped": "seal/update_skipped",
    "cut context": "seal/cut_share/context",
    "cut calls": "seal/cut_share/calls",
    "cut generation": "seal/cut_share/generation",
    "trained cut": "seal/trained_cut_share",
    "response clip": "response_length/clip_ratio",
}
"""What tells a learning run from a broken one, step by step: the trained tokens' probabilities against the
sampler's (verl's `calculate_debug_metrics` and `rollout_corr/` metrics: a mean difference near 0 and a
correlation near 1 say the trained tokens are the sampled ones), the policy's entropy (near 0: collapsed),
the gradient norm (0: no group carried an advantage), whether the step left the actor as it was (1: no
advantage, `seal.skip_update_without_signal`, and no gradient norm logged), and the share of episodes each
limit cut, of trained responses cut at `max_response_length` and verl's share of responses at that length."""
LEARNING = ["reward", "mixed groups"]
LABEL_PREFIX = "seal/label_share/"
RHO_PREFIX = "seal/rho/"
TIMINGS = [name for name, key in COLUMNS.items() if key.startswith("timing_s/")]


def step_table(steps: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(index=steps.index)
    for name, key in COLUMNS.items():
        table[name] = steps[key] if key in steps else float("nan")
    shares = per_label(steps, LABEL_PREFIX)
    if shares is not None:
        table["labels"] = [
            " ".join(f"{k}={v:.2f}" for k, v in row.items() if v > 0) for _, row in shares.iterrows()
        ]
    rho = per_label(steps, RHO_PREFIX)
    if rho is not None:
        table["ρ"] = [" ".join(f"{k}={v:.3f}" for k, v in row.dropna().items()) for _, row in rho.iterrows()]
    table.index.name = "step"
    return table


def health_table(steps: pd.DataFrame) -> pd.DataFrame:
    """The `HEALTH` columns per step (NaN where a launch did not log one)."""
    table = pd.DataFrame(
        {name: steps[key] if key in steps else float("nan") for name, key in HEALTH.items()},
        index=steps.index,
    )
    table.index.name = "step"
    return table


def per_label(steps: pd.DataFrame, prefix: str) -> pd.DataFrame | None:
    """The `prefix<label>` metrics, one column per label (named by the label); None when there are none."""
    columns = sorted(c for c in steps.columns if c.startswith(prefix))
    if not columns:
        return None
    return steps[columns].rename(columns=lambda c: c[len(prefix) :])


def side_by_side(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """Reward and mixed-group share of two runs, step by step (NaN where a run lacks the step)."""
    return pd.concat({names[0]: a[LEARNING], names[1]: b[LEARNING]}, axis=1)


def compare(a: pd.DataFrame, b: pd.DataFrame, names: tuple[str, str]) -> pd.DataFrame:
    """Median of each phase over the steps after the first, for both runs, and their ratio."""
    medians = pd.DataFrame({names[0]: a[TIMINGS].iloc[1:].median(), names[1]: b[TIMINGS].iloc[1:].median()})
    medians[f"{names[0]} / {names[1]}"] = medians[names[0]] / medians[names[1]]
    medians[f"{names[0]} - {names[1]} (s)"] = medians[names[0]] - medians[names[1]]
    return medians


def print_steps(runs: Sequence[Path]) -> None:
    """Each run's step table; with two runs, their learning numbers side by side and their median phase
    times compared. FileNotFoundError when a run has no metrics."""
    tables = []
    pd.set_option("display.width", 250, "display.max_columns", 30, "display.max_colwidth", 120)
    for run in runs:
        steps = read_steps(run)
        table = step_table(steps)
        print(f"\n{run}\n{table.to_string(float_format=lambda x: f'{x:.3f}')}")
        health = health_table(steps).to_string(float_format=lambda x: f"{x:.4g}")
        print(f"\n{run}: does it learn (rollout against trainer, entropy, gradient, cuts)\n{health}")
        tables.append(table)
    if len(tables) == 2:
        names = (runs[0].name, runs[1].name)
        learning = side_by_side(*tables, names).to_string(float_format="{:.3f}".format)
        print(f"\nreward and mixed-group share, step by step\n{learning}")
        medians = compare(*tables, names).to_string(float_format="{:.3f}".format)
        print(f"\nmedian seconds over steps 2+\n{medians}")
        share = tables[0]["seal_apatch"].iloc[1:].median() / tables[0]["step s"].iloc[1:].median()
        print(f"\nSEAL's own work (seal_apatch) in {names[0]}: {100 * share:.2f}% of a step")


def main(argv: list[str] | None = None) -> int:
    """`scripts/step_table.py RUN [RUN2]`, the alias of `seal report --steps`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (experiments/<name>); two compare")
    args = parser.parse_args(argv)
    if len(args.runs) > 2:
        parser.error("give one run, or two to compare")
    try:
        print_steps(args.runs)
    except FileNotFoundError as error:
        print(f"step_table: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
