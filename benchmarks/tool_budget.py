"""What the ground truth of every task uses of the tool budget, and that it passes with the budget on.

    python benchmarks/tool_budget.py                       # all 800 tasks, qwen_fc, a table of the maxima
    python benchmarks/tool_budget.py --split val --json    # one JSON object

Each task's ground truth is played in-process (`Episode`, the default `ToolBudget` of seal/env/budget.py,
per GT turn the turn's calls in one message, then "Done.") and finished. It prints, over the tasks, the most
any episode used of each budget — calls in one message, characters of one call's output and of one
message's outputs, file-system paths and characters, CPU seconds of one message's calls and of an episode's,
an episode's output characters, and CPU seconds of finish — beside the budget's default. Every ground-truth
episode must score 1 and no call may be over the budget (apart from the known defects of
`GROUND_TRUTH_DEFECTS`): exit 1 names any that did not. CPU times are this machine's (thread CPU time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from seal.bfcl.tasks import GROUND_TRUTH_DEFECTS, SPLITS, load_tasks, split_ids  # noqa: E402
from seal.env.budget import ToolBudget  # noqa: E402
from seal.env.episode import Episode  # noqa: E402
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS  # noqa: E402
from seal.protocol.ground_truth import ground_truth_actions  # noqa: E402

MEASURES = {
    "calls_per_message": "max_calls_per_message",
    "observation_chars": "max_observation_chars",
    "step_chars": "max_step_chars",
    "state_paths": "max_state_nodes",
    "state_chars": "max_state_chars",
    "step_cpu_s": "max_step_cpu_s",
    "episode_cpu_s": "max_episode_cpu_s",
    "episode_output_chars": "max_episode_output_chars",
    "finish_cpu_s": None,
}
"""Each measure and the budget field that bounds it (finish is bounded through the episode's budgets)."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="tool_budget.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all", help="tasks (default: all)")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS), default=DEFAULT_PROTOCOL, help="protocol")
    parser.add_argument("--json", action="store_true", help="print the maxima as one JSON object")
    return parser.parse_args(argv)


def measure(task_id: str, protocol: str) -> tuple[dict[str, float], bool, int]:
    """One ground-truth episode's use of each budget, whether it passed, and its calls over the budget."""
    episode = Episode(task_id, protocol=protocol)
    episode.reset()
    used = dict.fromkeys(MEASURES, 0.0)
    over = 0
    for action in ground_truth_actions(task_id, protocol):
        if episode.done:
            break
        step = episode.step(action)
        accepted = len(step.info["accepted"])
        over += sum("over the episode's budget" in r["reason"] for r in step.info["rejected"])
        used["calls_per_message"] = max(used["calls_per_message"], accepted + len(step.info["rejected"]))
        used["observation_chars"] = max(used["observation_chars"], episode.meter.largest_output)
        used["step_chars"] = max(used["step_chars"], episode.meter.step_chars)
        used["step_cpu_s"] = max(used["step_cpu_s"], episode.meter.step_cpu_s)
        size = episode.executor.state_size()
        if size is not None:
            used["state_paths"] = max(used["state_paths"], size.paths)
            used["state_chars"] = max(used["state_chars"], size.chars)
    used["episode_cpu_s"] = episode.meter.episode_cpu_s
    used["episode_output_chars"] = episode.meter.episode_output_chars
    started = time.thread_time()
    result = episode.finish()
    used["finish_cpu_s"] = time.thread_time() - started
    return used, result.reward == 1.0, over


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    task_ids = list(load_tasks()) if args.split == "all" else list(split_ids(args.split))
    maxima = dict.fromkeys(MEASURES, 0.0)
    worst: dict[str, str] = {}
    failed: list[str] = []
    for task_id in tqdm(task_ids, desc="ground truth", unit="ep", file=sys.stderr, disable=args.json):
        used, passed, over = measure(task_id, args.protocol)
        if (not passed or over) and task_id not in GROUND_TRUTH_DEFECTS:
            failed.append(task_id)
        for name, value in used.items():
            if value > maxima[name]:
                maxima[name], worst[name] = value, task_id
    defaults = dataclasses.asdict(ToolBudget())
    rows = {
        name: {"max": maxima[name], "task": worst.get(name), "budget": defaults.get(field or "")}
        for name, field in MEASURES.items()
    }
    if args.json:
        print(json.dumps({"tasks": len(task_ids), "failed": failed, "maxima": rows}))
    else:
        table = Table(
            title=f"ground truth of {len(task_ids)} tasks ({args.protocol}) against the tool budget"
        )
        for column in ("measure", "ground truth's max", "task", "budget default"):
            table.add_column(column)
        for name, row in rows.items():
            table.add_row(
                name,
                f"{row['max']:.4g}",
                str(row["task"]),
                "" if row["budget"] is None else str(row["budget"]),
            )
        Console(width=120).print(table)
    if failed:
        print(
            f"tool_budget.py: ground truth failing or over the budget: {', '.join(failed)}", file=sys.stderr
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
