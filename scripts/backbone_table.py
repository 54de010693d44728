"""The table of a measured backbone run: start-up, each step's phases, tokens, throughput and MFU (verl's
metrics, read as `seal report --steps` reads them), and the peaks scripts/resource_sampler.py recorded.

    python scripts/backbone_table.py experiments/backbone_3b [experiments/backbone_3b_shaped ...]

Start-up is the launch to the start of step 1: when step 1's metrics line appeared less the step's own time.
For a run of the 3B shape (a folder named backbone_3b...), the last line checks the steady step (the last
one) against the targets set for that shape on one H100: step <= 120 s, start-up <= 180 s, throughput >=
4,000 tokens/s/GPU. The 7B/8B runs measure what fits; they have no such targets.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from seal.reports.compare import read_steps

PHASES = {
    "step s": "timing_s/step",
    "gen": "timing_s/gen",
    "old_log_prob": "timing_s/old_log_prob",
    "ref": "timing_s/ref",
    "update_actor": "timing_s/update_actor",
    "update_weights": "timing_s/update_weights",
    "tokens": "perf/total_num_tokens",
    "response mean": "response_length/mean",
    "tokens/s/GPU": "perf/throughput",
    "MFU": "perf/mfu/actor",
}
TARGETS = {"step s": 120.0, "start-up s": 180.0, "tokens/s/GPU": 4000.0}
TARGETED_RUNS = "backbone_3b"
"""The folders (scripts/gpu_backbone_runs.sh's 3b runs) whose steps the targets are for."""
RESOURCES = "resources.json"


def run_table(run: Path) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per step the phases and rates; for the run its start-up and peaks."""
    steps = read_steps(run)
    table = pd.DataFrame({name: steps[key] if key in steps else float("nan") for name, key in PHASES.items()})
    table.index.name = "step"
    summary: dict[str, float] = {}
    resources = run / RESOURCES
    if resources.is_file():
        found = json.loads(resources.read_text())
        seen = {int(step): s for step, s in found["step_seen_s"].items()}
        first = min(seen, default=None)
        if first is not None and first in table.index:
            summary["start-up s"] = seen[first] - float(table.loc[first, "step s"])
        summary["peak GPU GiB"] = found["peak_gpu_used_gib"]
        summary["peak node GiB"] = found["peak_node_used_gib"]
        summary["node GiB"] = found["node_total_gib"]
        largest = found["peak_processes"][0] if found["peak_processes"] else {"rss_gib": float("nan")}
        summary["peak process RSS GiB"] = largest["rss_gib"]
    return table, summary


def verdict(table: pd.DataFrame, summary: dict[str, float]) -> str:
    last = table.iloc[-1]
    checks = {
        "step s": last["step s"] <= TARGETS["step s"],
        "tokens/s/GPU": last["tokens/s/GPU"] >= TARGETS["tokens/s/GPU"],
    }
    if "start-up s" in summary:
        checks["start-up s"] = summary["start-up s"] <= TARGETS["start-up s"]
    return ", ".join(f"{name} {'ok' if ok else 'MISSED'}" for name, ok in checks.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (experiments/<name>)")
    args = parser.parse_args(argv)
    pd.set_option("display.width", 200, "display.max_columns", 20)
    for run in args.runs:
        try:
            table, summary = run_table(run)
        except FileNotFoundError as error:
            print(f"backbone_table: {error}", file=sys.stderr)
            return 1
        print(f"\n{run}")
        print(table.to_string(float_format=lambda x: f"{x:,.3f}" if abs(x) < 1 else f"{x:,.1f}"))
        print("  ".join(f"{name} {value:,.1f}" for name, value in summary.items()) or "(no resources.json)")
        if run.name.startswith(TARGETED_RUNS):
            print(f"3B targets at step {table.index[-1]}: {verdict(table, summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
