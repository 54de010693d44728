"""What the episode limits leave passable: every task's ground truth, played through the agent loop.

    python benchmarks/episode_budget.py --tokenizer /models/smollm2                   # exp/SEAL.yaml, all 800
    python benchmarks/episode_budget.py --tokenizer DIR --conf exp/smoke_gpu.yaml --split val --json
    python benchmarks/episode_budget.py --tokenizer DIR -- seal.rollout.max_env_tokens=2048

Each task's ground-truth replies are "sampled" by a scripted server and played through `SealAgentLoop`
(`seal.trainer.sft.data.GroundTruthPlayer`) with the experiment's own limits, protocol, context builder
and tokenizer (no model, no GPU): `max_llm_calls`, the context stop at `max_model_len −
max_response_length`, environment messages clipped to `max_env_tokens`, and the trained response cut at
`max_response_length`. Train mode shows the interface Ω of the experiment's preset, eval mode the raw one.
Per category it prints how many
episodes complete (and pass), how many a limit cut (context, calls, a reply over its max_tokens), and how
many had trained tokens cut. Every completed ground-truth episode must score 1 (apart from the known
defects of `GROUND_TRUTH_DEFECTS`): exit 1 names any that did not. `--tokenizer` is a local model folder
(tokenizer and config.json, e.g. from scripts/make_smoke_model.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from seal.bfcl.tasks import CATEGORIES, GROUND_TRUTH_DEFECTS, SPLITS, load_tasks, split_ids  # noqa: E402
from seal.results.pass_rate import passed  # noqa: E402

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput

    from seal.trainer.rl.trajectory import TrajectoryFields

COLUMNS = ("n", "completed", "passed", "cut_context", "cut_calls", "cut_generation", "trained_cut")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="episode_budget.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tokenizer", type=Path, required=True, help="local model folder (tokenizer)")
    parser.add_argument("--conf", type=Path, default=PROJECT / "exp" / "SEAL.yaml", help="experiment")
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="all", help="tasks (default: all)")
    parser.add_argument("--tasks", help="comma-separated task ids instead of a split")
    parser.add_argument(
        "--mode", choices=("train", "eval"), default="train", help="train: with Ω (default); eval: raw"
    )
    parser.add_argument("--json", action="store_true", help="print the table as one JSON object")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides of the experiment, after --")
    return parser.parse_args(argv)


def play(
    config: DictConfig, task_ids: Sequence[str], mode: str, progress: Callable[[int], object] | None = None
) -> list[tuple[AgentLoopOutput, TrajectoryFields]]:
    """Each task's ground truth played once in `mode`, in order; `progress(1)` after each."""
    from seal.dataset import rows
    from seal.trainer.sft.data import GroundTruthPlayer

    wanted = set(task_ids)
    by_id = {row["extra_info"]["task_id"]: row for split in SPLITS for row in rows(split, wanted)}
    player = GroundTruthPlayer(config)

    async def play_all() -> list[tuple[AgentLoopOutput, TrajectoryFields]]:
        played = []
        for task_id in task_ids:
            played.append(await player.rollout(by_id[task_id], mode))
            if progress is not None:
                progress(1)
        return played

    return asyncio.run(play_all())


def tally(played: Sequence[TrajectoryFields]) -> dict[str, dict[str, int]]:
    """`{category: {"n", "completed", "passed", "cut_context", "cut_calls", "cut_generation",
    "trained_cut"}}`: completed = played to its end (no cut, no environment error)."""
    table = {category: Counter({column: 0 for column in COLUMNS}) for category in CATEGORIES}
    for fields in played:
        row = table[fields.category]
        row["n"] += 1
        completed = fields.cut == "none" and not fields.truncated and not fields.env_error
        row["completed"] += completed
        row["passed"] += completed and passed(fields.reward)
        if fields.cut != "none":
            row[f"cut_{fields.cut}"] += 1
        row["trained_cut"] += fields.trained_cut
    return {category: dict(row) for category, row in table.items() if row["n"]}


def render(table: dict[str, dict[str, int]], title: str) -> Table:
    out = Table(title=title)
    out.add_column("category")
    for column in COLUMNS:
        out.add_column(column, justify="right")
    totals = Counter()
    for category, row in table.items():
        out.add_row(category, *(str(row[c]) for c in COLUMNS))
        totals.update(row)
    out.add_row("all", *(str(totals[c]) for c in COLUMNS), style="bold")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not (args.tokenizer / "config.json").is_file():
        print(
            f"episode_budget.py: {args.tokenizer} has no config.json (a model folder is needed)",
            file=sys.stderr,
        )
        return 2
    from seal.trainer.experiment import ExperimentError
    from seal.trainer.sft.data import episode_config

    try:
        config = episode_config(args.conf, args.tokenizer.resolve(), args.overrides)
    except ExperimentError as exc:
        print(f"episode_budget.py: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("verl").setLevel(logging.ERROR)  # one builder warning per loop would drown the table
    task_ids = list(load_tasks()) if args.split == "all" else list(split_ids(args.split))
    if args.tasks:
        task_ids = [task_id.strip() for task_id in args.tasks.split(",") if task_id.strip()]
        unknown = sorted(set(task_ids) - set(load_tasks()))
        if unknown:
            print(f"episode_budget.py: unknown task id(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
    bar = tqdm(total=len(task_ids), desc="ground truth", unit="ep", file=sys.stderr, disable=args.json)
    with bar, contextlib.redirect_stdout(sys.stderr):  # verl prints its dataset class: stdout is the table
        played = [fields for _, fields in play(config, task_ids, args.mode, progress=bar.update)]
    table = tally(played)
    if args.json:
        print(json.dumps(table))
    else:
        rollout = config.actor_rollout_ref.rollout
        limits = config.seal.rollout
        interface = f"Ω preset {config.seal.interface.preset}" if args.mode == "train" else "raw interface"
        title = (
            f"{args.conf.name}, {args.split}, {args.mode} mode ({interface}): "
            f"max_llm_calls {limits.max_llm_calls}, "
            f"context {rollout.max_model_len} − {rollout.response_length}, "
            f"env messages ≤ {limits.max_env_tokens} tokens"
        )
        Console(width=120).print(render(table, title))
    failed = [
        fields.task_id
        for fields in played
        if fields.cut == "none"
        and not fields.truncated
        and not fields.env_error
        and fields.reward != 1.0
        and fields.task_id not in GROUND_TRUTH_DEFECTS
    ]
    defects = sorted(GROUND_TRUTH_DEFECTS & {fields.task_id for fields in played})
    if defects and not args.json:
        print(f"known ground-truth defect(s), not counted as failures: {', '.join(defects)}")
    if failed:
        print(
            f"FAIL: {len(failed)} completed ground-truth episode(s) scored 0: {', '.join(failed)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
