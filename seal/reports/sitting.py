"""One sitting's result line: one arm x one seed, from its run folder.

    python -m seal.reports.sitting --arm seal --seed 1 --card "NVIDIA H200" --gpus 4 --sft-gpus 4 \
        --run experiments/learn_qwen_seal_s1 --phases PHASES_DIR --commit abc1234 \
        >> experiments/qwen/runs.jsonl

The sitting driver (`gpu/gpu_qwen_compare.sh sitting`, docs/guides/gpu.md) calls it once the arm has
ended. The run folder holds the arm's greedy validation dumps (`validation/{step}.jsonl`: the first, at step
0, is val before training, the last val after), its test passes (after the last step: `test_report.json`,
written in the launch by `seal.test_after`; before the first, where `seal.test_before` ran it:
`test/global_step_0/0.jsonl`) and its metrics (`metrics/*.jsonl`); PHASES_DIR holds one file per phase, named
after it, with its whole seconds.

The SFT start is not scored apart: the arm's launch starts from it, so its val before training is the
start's greedy val (same model, same 100 val tasks, greedy) and its first step's mixed share is the start's
own (8 samples at T=1 of each of the step's 8 train tasks, under the arm's interface). `sft_val` therefore
equals `val_before` by construction. The metrics hold no mixed share per category, so
`sft_mixed_by_category` is null.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from seal.reports.compare import read_steps
from seal.reports.runs import CHECKPOINT_PREFIX, dump_rows, read_dump, test_scores, validation_history
from seal.results.campaign import ARMS
from seal.results.endings import ENDING_FIELDS, dump_row_ending
from seal.results.pass_rate import SplitScore
from seal.trainer.rl.finish_by import planned_steps

MIXED_SHARE = "seal/groups/mixed_share"
"""The trainer's per-step share of GRPO groups whose rewards differ (seal/trainer/rl/closed_loop.py)."""
PHASES = ("install", "sft", "arm_startup", "arm_steps", "test")
TASK_SCORES = "task_scores.csv"
"""Beside the line in a sitting's files: each task's greedy score before and after training, per split, and
how its episode ended (`TASK_SCORE_COLUMNS`)."""
TASK_SCORE_COLUMNS = ["split", "when", "task_id", "score", *ENDING_FIELDS, "repeated"]
"""`llm_calls`: the model replies the episode took; `call_limit`: it used all it was allowed
(seal/results/endings.py); `looped`: its last replies were one identical call; `repeated`: that call (its
first `REPEATED_CHARS` characters), empty where the episode did not loop. The last four are empty in a dump
row that does not carry them. Files written before they were kept have the first four columns only, or the
first seven."""


class SittingError(ValueError):
    """A sitting whose files do not make a result line; the message is one line."""


def sitting_line(identity: dict[str, Any], run: Path, phases: dict[str, int]) -> dict[str, Any]:
    """The result line: `identity` (arm, seed, card, gpus, commit, date) and the measured values, each mean
    beside its per-category dict (`*_by_category`). The start's values are the arm's before it trained:
    `sft_val` is the first validation dump (step 0, so equal to `val_before`), `sft_mixed` step 1's mixed
    share, not the mean over steps. `test_before` is null where the launch played no test pass at step 0."""
    history = validation_history(run / "validation")
    if len(history) < 2:
        raise SittingError(f"{run / 'validation'}: {len(history)} validation pass(es), need before and after")
    if min(history) != 0:
        raise SittingError(
            f"{run / 'validation'}: the first validation pass is at step {min(history)}, not 0 (untrained)"
        )
    tested = dict(test_scores(run)).get("last")
    if tested is None:
        raise SittingError(
            f"{run}: no test_report.json (the launch's test pass, seal.test_after, did not end)"
        )
    steps = read_steps(run)
    mixed = steps.get(MIXED_SHARE)
    if mixed is None or pd.isna(mixed.get(1)):
        raise SittingError(f"{run / 'metrics'}: no {MIXED_SHARE} at step 1, the SFT start's mixed share")
    before = history[min(history)]
    line = dict(identity)
    line |= _split("sft_val", before)
    line |= _scored("sft_mixed", float(mixed[1]), None)
    line |= _split("val_before", before) | _split("val_after", history[max(history)])
    line |= _split("test_after", tested)
    untrained = score_dumps(run).get(("test", "before"))
    line |= _split("test_before", read_dump(untrained)) if untrained else _scored("test_before", None, None)
    line["steps"] = len(steps)
    planned = planned_steps(run)
    if planned is not None:
        line["planned_steps"] = planned
    line["mixed_share_mean"] = float(mixed.mean())
    line["mixed_share_by_step"] = [float(x) for x in mixed]
    line["phases"] = {name: phases[name] for name in PHASES if name in phases}
    line["sitting_s"] = sum(line["phases"].values())
    return line


def score_dumps(run: Path) -> dict[tuple[str, str], Path]:
    """The greedy dumps before and after training, by (split, when): val's first and last validation dump,
    test's step-0 and last test pass where they ran."""
    val = sorted((int(p.stem), p) for p in (run / "validation").glob("*.jsonl") if p.stem.isdigit())
    tested = sorted(
        (int(folder.name.removeprefix(CHECKPOINT_PREFIX)), folder)
        for folder in (run / "test").glob(f"{CHECKPOINT_PREFIX}*")
        if folder.name.removeprefix(CHECKPOINT_PREFIX).isdigit()
    )
    dumps = {}
    if val:
        dumps["val", "before"], dumps["val", "after"] = val[0][1], val[-1][1]
    for step, folder in tested:
        if (folder / f"{step}.jsonl").is_file():
            dumps["test", "before" if step == 0 else "after"] = folder / f"{step}.jsonl"
    return dumps


def task_scores(run: Path) -> pd.DataFrame:
    """Each task's greedy score before and after training and how its episode ended (`TASK_SCORE_COLUMNS`),
    from `score_dumps`: the per-task view behind the line's means, for a paired test of before against after,
    and for what the failures became (a policy that learnt to repeat a rejected call fails by looping)."""
    rows = [
        {"split": split, "when": when, **_task_outcome(row, f"{path}")}
        for (split, when), path in score_dumps(run).items()
        for row in dump_rows(path)
    ]
    return pd.DataFrame(rows, columns=TASK_SCORE_COLUMNS)


def _task_outcome(row: dict[str, Any], where: str) -> dict[str, Any]:
    """One dump row's task, score and ending (`dump_row_ending`)."""
    task_id = row.get("task_id") or row.get("gts")
    return {"task_id": task_id, "score": row["score"], **dump_row_ending(row, f"{where}: {task_id}")}


def _scored(name: str, mean: float | None, by_category: dict[str, float] | None) -> dict[str, Any]:
    return {name: mean, f"{name}_by_category": by_category}


def _split(name: str, score: SplitScore) -> dict[str, Any]:
    return _scored(name, score.mean, score.by_category)


def read_phases(folder: Path) -> dict[str, int]:
    """Each phase file's whole seconds, by phase name."""
    return {name: int((folder / name).read_text()) for name in PHASES if (folder / name).is_file()}


def _recorded_count(text: str) -> int | None:
    """A count the driver read from a file, or None where it had none to read (an empty argument)."""
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of GPUs (1 or more, or empty)")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seal.reports.sitting", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--arm", required=True, choices=ARMS, help="the arm's name (exp/learn_qwen_ARM.yaml)")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--card", required=True, help="the GPU's name, as nvidia-smi gives it")
    parser.add_argument("--gpus", type=int, required=True, help="GPUs the arm trained on")
    parser.add_argument(
        "--sft-gpus",
        type=_recorded_count,
        help="GPUs the seed's SFT start trained on (empty: not recorded, and the line leaves it out)",
    )
    parser.add_argument("--run", type=Path, required=True, help="the arm's run folder")
    parser.add_argument("--phases", type=Path, required=True, help="folder of one seconds file per phase")
    parser.add_argument("--commit", required=True, help="the project's commit the sitting ran")
    parser.add_argument(
        "--task-scores", type=Path, help=f"also write each task's score before and after here ({TASK_SCORES})"
    )
    args = parser.parse_args(argv)
    day = datetime.now(UTC).date().isoformat()
    identity = {
        "arm": args.arm,
        "seed": args.seed,
        "card": args.card,
        "gpus": args.gpus,
        "date": day,
        "commit": args.commit,
        "files": f"{args.arm}_s{args.seed}_{day}",
    }
    if args.sft_gpus is not None:
        identity["sft_gpus"] = args.sft_gpus
    try:
        line = sitting_line(identity, args.run, read_phases(args.phases))
        if args.task_scores is not None:
            task_scores(args.run).to_csv(args.task_scores, index=False)
    except (OSError, ValueError, KeyError) as exc:
        print(f"sitting: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
