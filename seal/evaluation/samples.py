"""Several sampled episodes a task (`seal eval --samples N --temperature T`): pass@1, pass@N, mixed share.

Greedy decoding gives one verdict a task; GRPO learns only from groups whose samples disagree. A sampled run
therefore reports, per category and as the paper's Avg (the unweighted mean over categories):
- pass@1: the mean over samples of the pass rate (AgentEvolver's avg@N);
- pass@N: the share of tasks that at least one sample passes;
- mixed: the share of tasks whose samples neither all pass nor all fail, i.e. whose GRPO group would carry
  a gradient.
Each sample is an ordinary run folder (`OUT/sample_K`), so `seal view`, `seal diagnose` and `--resume` work on
it unchanged; sample K draws each request's seed from SEED+K-1 and the request's conversation
(`seal.evaluation.endpoint.request_seed`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import category_of
from seal.results.pass_rate import category_order, passed
from seal.results.tables import SHORT_NAMES


def sample_folder(out: Path, sample: int) -> Path:
    """Where sample `sample` (1-based) of a run into `out` keeps its episodes."""
    return out / f"sample_{sample}"


def sample_seed(seed: int | None, sample: int) -> int | None:
    """The seed sample `sample` (1-based) sends: a different one per sample, the same on every rerun."""
    return None if seed is None else seed + sample - 1


def _share(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def sampled_summary(samples: Sequence[Sequence[dict[str, Any]]], split: str | None) -> dict[str, Any]:
    """The summary of N samples' episode lines (`samples[k]`: sample k+1's lines, "error" on an endpoint
    failure). A task any sample of which the endpoint failed is left out of every rate and listed."""
    outcomes: dict[str, list[bool]] = defaultdict(list)
    failed: set[str] = set()
    for records in samples:
        for record in records:
            if "error" in record:
                failed.add(record["task_id"])
            else:
                outcomes[record["task_id"]].append(passed(record["reward"]))
    complete = {t: o for t, o in outcomes.items() if t not in failed and len(o) == len(samples)}
    by_category: dict[str, list[list[bool]]] = defaultdict(list)
    for task_id, results in complete.items():
        by_category[category_of(task_id)].append(results)
    rows = {}
    for category in sorted(by_category, key=category_order):
        tasks = by_category[category]
        rows[category] = {
            "n": len(tasks),
            "pass_at_1": _share([_share(r) for r in tasks]),
            "pass_at_n": _share([any(r) for r in tasks]),
            "mixed_share": _share([any(r) and not all(r) for r in tasks]),
        }
    means = {
        key: _share([row[key] for row in rows.values()]) for key in ("pass_at_1", "pass_at_n", "mixed_share")
    }
    sample_rates = []
    for records in samples:
        kept = [r for r in records if r["task_id"] in complete]
        per_category: dict[str, list[bool]] = defaultdict(list)
        for record in kept:
            per_category[category_of(record["task_id"])].append(passed(record["reward"]))
        sample_rates.append(_share([_share(v) for v in per_category.values()]))
    return {
        "split": split,
        "samples": len(samples),
        "n": len(complete),
        **means,
        "pass_rate": means["pass_at_1"],
        "sample_pass_rates": sample_rates,
        "by_category": rows,
        "endpoint_errors": {"count": len(failed), "task_ids": sorted(failed)},
    }


def sampled_table(summary: dict[str, Any]) -> str:
    """One row per category and the Avg: tasks, pass@1, pass@N and the mixed share."""
    n = summary["samples"]
    lines = [f"| category | tasks | pass@1 | pass@{n} | mixed |", "|---|---|---|---|---|"]
    for category, row in summary["by_category"].items():
        name = SHORT_NAMES.get(category, category)
        rates = f"{row['pass_at_1']:.1%} | {row['pass_at_n']:.1%} | {row['mixed_share']:.1%}"
        lines.append(f"| {name} | {row['n']} | {rates} |")
    lines.append(
        f"| **Avg** | {summary['n']} | {summary['pass_at_1']:.1%} | {summary['pass_at_n']:.1%} | "
        f"{summary['mixed_share']:.1%} |"
    )
    return "\n".join(lines) + "\n"
