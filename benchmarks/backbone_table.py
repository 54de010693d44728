"""The table of a measured backbone run: start-up, each step's phases, tokens, throughput and MFU (verl's
metrics, read as `seal report --steps` reads them), and the peaks benchmarks/resource_sampler.py recorded.

    python benchmarks/backbone_table.py experiments/backbone_3b [experiments/backbone_3b_shaped ...]

Start-up is the launch to the start of its first step: when that step's metrics line appeared less the
step's own time; where the sampler kept the start-up's landmarks, a line splits it into its parts (PARTS).
verl logs the MFU of the actor's update only; the forward-only phases' (old_log_prob, ref)
is derived from it: the same tokens, and a forward is a third of the FLOPs verl counts for a training pass,
so their MFU is the update's times update_actor / (3 x the phase's seconds). With several runs a last table
sets them side by side at their last step (the GPUs read from the tokens, the step and the throughput:
verl's throughput is per GPU): the scaling table of gpu/gpu_paper_launch.sh's scale-1/2/4 runs.
The GPUs a run was sampled on are named (the sampler's record), so that a table says which card its numbers
are from. A run of a shape with targets checks its last step against them: the 3B shape on one H100 (folders
named backbone_3b...: step <= 110 s, start-up <= 180 s, >= 4,000 tokens/s/GPU; a run on another card says
so beside its verdict) and the paper's 7B launch on four GPUs (paper_7b and its _shaped, _tuned, _nocompile,
_fast and _liger_decoder runs: step <= 180 s, start-up <= 240 s, >= 2,500 tokens/s/GPU,
update_actor MFU >= 40%). Profiled runs (_profile) and the others measure; they have no targets.
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
FORWARD_PHASES = ("old_log_prob", "ref")
"""Phases that run a forward pass over the step's tokens, whose MFU is derived from the update's."""
TARGETS = {
    "3B": {"step s": 110.0, "tokens/s/GPU": 4000.0, "start-up s": 180.0},
    "7B": {"step s": 180.0, "tokens/s/GPU": 2500.0, "MFU": 0.40, "start-up s": 240.0},
}
TARGET_CARDS = {"3B": "H100"}
"""The card a shape's targets are set for, where they name one (the 7B's are for whichever four GPUs)."""
TARGETED_RUNS = "backbone_3b"
"""The folders (gpu/gpu_backbone_runs.sh's 3b runs) whose steps the 3B targets are for."""
TARGETED_7B = (
    "paper_7b",
    "paper_7b_shaped",
    "paper_7b_tuned",
    "paper_7b_nocompile",
    "paper_7b_fast",
    "paper_7b_liger_decoder",
)
"""The runs of gpu/gpu_paper_launch.sh that the 7B targets are for (its full-cap and timing runs)."""
RESOURCES = "resources.json"
PARTS = (
    ("launcher", "launcher"),
    ("Ray", "ray"),
    ("task runner", "task runner"),
    ("tokenizer and data", "data loaders"),
    ("workers", "worker group"),
    ("actor and ref", "actor and ref"),
    ("reward loop", "reward loop"),
    ("rollout servers", "rollout servers"),
    ("sleep and load", "ready"),
    ("to step 1", "start-up s"),
)
"""The start-up's parts in order, each ending at a landmark of benchmarks/resource_sampler.py (the last at
step 1); a part whose end was not seen joins the next (runs sampled before a landmark existed). Runs whose
task runner started TransferQueue before the trainer's set-up, not beside it, lack the "task runner"
landmark: theirs read "task runner + tokenizer and data"."""
BESIDE = ("TransferQueue beside", "task runner", "transfer queue")
"""Work off the start-up's path, after the parts: its name and the landmarks at its start and end."""


def targets_of(run: Path) -> tuple[str, dict[str, float]] | None:
    """The shape whose targets apply to `run` and those targets, or None (a profiled run: the profiler
    slows the step it records)."""
    if run.name.endswith("_profile"):
        return None
    if run.name.startswith(TARGETED_RUNS):
        return "3B", TARGETS["3B"]
    if run.name in TARGETED_7B:
        return "7B", TARGETS["7B"]
    return None


def run_table(run: Path) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per step the phases and rates; for the run its start-up and peaks."""
    steps = read_steps(run)
    table = pd.DataFrame({name: steps[key] if key in steps else float("nan") for name, key in PHASES.items()})
    for phase in FORWARD_PHASES:
        table[f"MFU {phase}"] = table["MFU"] * table["update_actor"] / (3 * table[phase])
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


def cards_of(run: Path) -> list[str]:
    """The model of each GPU the run was sampled on; empty for a record from before the sampler kept them."""
    resources = run / RESOURCES
    return list(json.loads(resources.read_text()).get("gpu_names", [])) if resources.is_file() else []


def card_note(shape: str, cards: list[str]) -> str:
    """Where a shape's targets name a card and the run was on another: what to read its verdict as."""
    wanted = TARGET_CARDS.get(shape)
    if wanted is None or not cards or all(wanted in card for card in cards):
        return ""
    return f" (the targets are for the {wanted}; this ran on {', '.join(sorted(set(cards)))})"


def startup_parts(run: Path, start_up: float | None) -> dict[str, float]:
    """Seconds of each part of the start-up (PARTS), a part whose end was not seen joined to the next
    ("a + b"), then the work beside them (BESIDE) where both its landmarks were seen; empty without
    landmarks."""
    resources = run / RESOURCES
    seen = json.loads(resources.read_text()).get("landmarks_s", {}) if resources.is_file() else {}
    if not seen:
        return {}
    ends = {**seen, **({"start-up s": start_up} if start_up is not None else {})}
    parts, pending, since = {}, [], 0.0
    for name, end in PARTS:
        pending.append(name)
        if end in ends:
            parts[" + ".join(pending)] = ends[end] - since
            pending, since = [], ends[end]
    name, start, end = BESIDE
    if start in seen and end in seen:
        parts[name] = seen[end] - seen[start]
    return parts


def verdict(table: pd.DataFrame, summary: dict[str, float], targets: dict[str, float]) -> str:
    """Each target met or missed at the last step (start-up: the run's); lower is better for times."""
    last = {**table.iloc[-1].to_dict(), **summary}
    checks = {}
    for name, target in targets.items():
        if name in last:
            checks[name] = last[name] <= target if name.endswith(" s") else last[name] >= target
    return ", ".join(f"{name} {'ok' if ok else 'MISSED'}" for name, ok in checks.items())


def side_by_side(runs: dict[str, tuple[pd.DataFrame, dict[str, float]]]) -> pd.DataFrame:
    """One row per run at its last step: GPUs, the phases, tokens/s (all GPUs and per GPU), MFU, the peaks."""
    rows = {}
    for name, (table, summary) in runs.items():
        last = table.iloc[-1]
        gpus = last["tokens"] / (last["tokens/s/GPU"] * last["step s"])
        rows[name] = {
            "GPUs": round(gpus),
            **{column: last[column] for column in ("step s", "gen", "old_log_prob", "ref", "update_actor")},
            "tokens/s": last["tokens/s/GPU"] * round(gpus),
            "tokens/s/GPU": last["tokens/s/GPU"],
            **{column: last[column] for column in ("MFU", "MFU old_log_prob", "MFU ref")},
            **{
                key: summary.get(key, float("nan")) for key in ("start-up s", "peak GPU GiB", "peak node GiB")
            },
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "run (last step)"
    return frame


def number(value: float) -> str:
    return f"{value:,.3f}" if abs(value) < 1 else f"{value:,.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (experiments/<name>)")
    args = parser.parse_args(argv)
    pd.set_option("display.width", 250, "display.max_columns", 30)
    measured = {}
    for run in args.runs:
        try:
            table, summary = run_table(run)
        except FileNotFoundError as error:
            print(f"backbone_table: {error}", file=sys.stderr)
            return 1
        measured[str(run)] = (table, summary)
        print(f"\n{run}")
        print(table.to_string(float_format=number))
        print("  ".join(f"{name} {value:,.1f}" for name, value in summary.items()) or "(no resources.json)")
        cards = cards_of(run)
        if cards:
            print(f"GPUs: {len(cards)} x {', '.join(sorted(set(cards)))}")
        parts = startup_parts(run, summary.get("start-up s"))
        if parts:
            print("start-up parts s: " + "  ".join(f"{name} {value:,.1f}" for name, value in parts.items()))
        shape = targets_of(run)
        if shape is not None:
            note = card_note(shape[0], cards)
            print(f"{shape[0]} targets at step {table.index[-1]}: {verdict(table, summary, shape[1])}{note}")
    if len(measured) > 1:
        print(f"\nside by side\n{side_by_side(measured).to_string(float_format=number)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
