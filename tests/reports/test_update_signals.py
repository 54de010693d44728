"""The per-sitting drift of the update's signals: the first quarter of the steps against the last, each
metric in its own format, a dash where a metric was not logged."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from seal.reports.update_signals import SIGNALS, signal_rows

ROOT = Path(__file__).resolve().parents[2]


def steps(count: int, **columns: list[float]) -> pd.DataFrame:
    return pd.DataFrame(columns, index=range(1, count + 1))


def test_each_signal_is_the_mean_of_the_first_quarter_against_the_last():
    entropy = [0.1, 0.3, 0.5, 0.5, 0.5, 0.5, 0.2, 0.4]
    turns = [10.0, 12.0, 0.0, 0.0, 0.0, 0.0, 30.0, 31.0]
    (row,) = signal_rows([("SEAL", 2, steps(8, **{"actor/entropy": entropy, "num_turns/mean": turns}))])
    assert row["arm"] == "SEAL" and row["seed"] == "2" and row["steps"] == "1–2 → 7–8"
    assert row["entropy"] == "0.200 → 0.300"
    assert row["turns an episode"] == "11.0 → 30.5"
    assert row["net share"] == row["PPO KL"] == "—"  # not logged in this sitting


def test_small_values_keep_two_significant_digits_and_a_short_run_compares_its_ends():
    (row,) = signal_rows([("vanilla", 1, steps(3, **{"actor/ppo_kl": [0.0019, 0.5, -3.4e-06]}))])
    assert row["steps"] == "1 → 3"
    assert row["PPO KL"] == "0.0019 → -3.4e-06"


def test_a_metric_logged_in_part_of_the_steps_is_read_where_it_was_and_a_sitting_without_steps_has_no_row():
    net = [float("nan"), -0.2, 0.0, 0.0, 0.0, 0.0, 0.0, -0.6]
    rows = signal_rows(
        [("SEAL", 1, steps(8, **{"seal/advantage/net_share": net})), ("vanilla", 1, pd.DataFrame())]
    )
    assert [row["net share"] for row in rows] == ["-0.20 → -0.30"]


def test_the_metrics_read_are_in_a_real_sitting_s_metrics_or_are_logged_since_and_documented():
    metrics = ROOT / "results/qwen_coder_1_5b/seal_s2_2026-11-29/metrics/arm.jsonl"
    logged = {key for line in metrics.read_text().splitlines() for key in json.loads(line)["data"]}
    read = {metric for metric, _ in SIGNALS.values()}
    newer = {"seal/advantage/net_share", "seal/groups/cut_in_mixed_share"}
    assert read - logged == newer
    reference = (ROOT / "docs/reference/metrics.md").read_text()
    assert all(f"`{metric}`" in reference for metric in newer)
