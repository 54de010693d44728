r"""Per-category pass rates of a training run, step by step, and how its failure profile evolved.

    python scripts/stats_validation_bfcl.py --run experiments/SEAL [--out experiments/SEAL/stats]
    python scripts/stats_validation_bfcl.py --run experiments/SEAL --sft experiments/sft_eval

Reads the run folder the trainer and the launcher write (experiments/<name>/):
  validation/{step}.jsonl        verl's validation dump (100 val tasks), one row per task: score, category
  test/global_step_N/{N}.jsonl   the test split (300 tasks) of a checkpoint (`launcher.py --test`)
  test_report.json               which checkpoints were tested: best on val, and last
  seal_steps.jsonl               per training step, C_t (counts of every label since the start)
Prints val pass rates per category for every step and test for the best-val and the last checkpoint, with
their mean as the paper's "Avg" (in %), and writes into --out: pass_rates.csv, val_curves.png (one curve
per category and Avg), label_shares.csv and label_shares.png (the share of each label among the training
batch's ground-truth turns at every step, from the step-to-step growth of C_t's running total), and, where
the dumps carry each episode's replies and action log, val_endings.csv (per validation step, the shares of
episodes that looped and that used all their LLM calls, and the replies an episode took). It ends with the
`seal view RUN` command that shows the run's validation and test episodes turn by turn.

--sft FOLDER [FOLDER ...] adds models evaluated on their own beside the run (an SFT model, the base model
before it): each FOLDER is the run folder of a validation-only launch, its last `validation/{step}.jsonl`
dump scored per split (train, val, test: the rows' `split`), shown with the folder's name as checkpoint.
One pass can hold several splits (docs/guides/training.md, "SFT warm start"):
    python launcher.py --conf exp/smoke_gpu.yaml -- actor_rollout_ref.model.path=SFT_MODEL_DIR \
        trainer.val_only=true trainer.experiment_name=sft_eval data.val_max_samples=-1 \
        'data.val_files=[data/bfcl_val.parquet,data/bfcl_test.parquet]'

--ood NAME=DIR [NAME=DIR ...] instead puts models' out-of-distribution evaluations side by side in the
shape of the paper's Table 2, with the paper's Qwen2.5-7B rows for reference (seal/reports/table2.py);
each DIR holds the `seal eval --suite bfcl_v4_memory|bfcl_v4_web_search|tau2` output folders of one model
(or is one); --out also writes OUT/table2.md and OUT/table2.json:
    python scripts/stats_validation_bfcl.py --ood base=runs/ood/base vanilla=runs/ood/rl seal=runs/ood/seal
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd

from seal.bfcl.tasks import CATEGORIES, SPLITS, split_ids
from seal.jsonl import JsonLinesError, json_objects
from seal.reports import table2
from seal.results.endings import LOOP_CALLS, dump_row_ending, ending_shares
from seal.results.pass_rate import SplitScore, score_rows
from seal.results.tables import SHORT_NAMES, colour_of, label_order, legend_as_stacked
from seal.tocf.labels import EXCLUDED

STEPS_FILE = "seal_steps.jsonl"
"""In the run folder: the trainer's line per step (C_t, ρ and Ω after it)."""
REPORT_NAME = "test_report.json"
"""In the run folder: which checkpoints were tested, and their test scores (`launcher.py --test`)."""
CHECKPOINT_PREFIX = "global_step_"
"""verl's checkpoint folders, and the test dumps' folders under `<run>/test/`."""
TEST_MARKERS = ("s", "D")
"""Markers of the best-val and the last checkpoint's test pass rates in val_curves.png."""
CHECKPOINT_NAMES = {"best": "best-val checkpoint", "last": "last checkpoint"}
CATEGORY_STYLES = (("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"))
"""Marker and line style of each category's val curve in val_curves.png: categories with equal pass rates
would otherwise hide one another."""
DODGE = 0.05
"""How far apart, in parts of the smallest step interval, neighbouring categories' curves are drawn."""
COLUMNS = ["split", "step", "checkpoint", *(SHORT_NAMES[c] for c in CATEGORIES), "Avg", "n"]


@dataclass(frozen=True)
class Selection:
    """Which checkpoints to report, and the val means they were chosen from (step -> mean)."""

    best_step: int
    last_step: int
    val_mean: dict[int, float]


def write_test_report(
    run_dir: Path, selection: Selection, scores: dict[int, SplitScore], rule: str
) -> dict[str, Any]:
    """Write `run_dir/test_report.json` (what `seal report` and the comparison read) and return it."""
    report = {
        "selection": {
            "rule": rule,
            "best_step": selection.best_step,
            "last_step": selection.last_step,
            "val_mean": {str(step): mean for step, mean in selection.val_mean.items()},
        },
        "test": {
            "best": asdict(scores[selection.best_step]),
            "last": asdict(scores[selection.last_step]),
        },
    }
    (run_dir / REPORT_NAME).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


class RunError(ValueError):
    """The folder is not a readable run; the message is one line."""


@cache
def _split_by_task() -> dict[str, str]:
    return {task_id: split for split in SPLITS for task_id in split_ids(split)}


def split_of(task_id: object) -> str:
    """`train`, `val` or `test` for a task id of the split; "" for anything else."""
    return _split_by_task().get(task_id, "") if isinstance(task_id, str) else ""


def dump_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of one `{step}.jsonl` dump, each checked (`dump_lines`)."""
    return [row for _, row in dump_lines(path)]


def dump_lines(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """`("FILE:LINE", row)` for the rows of one `{step}.jsonl` dump, each checked: a JSON object with a task
    id (`task_id` or `gts`), a finite numeric score, and the only row of its task. Anything else is a
    `JsonLinesError` naming the file and line, never a row miscounted (a NaN score as a failure, a repeated
    row twice)."""
    rows: list[tuple[str, dict[str, Any]]] = []
    first_line: dict[str, str] = {}
    for where, row in json_objects(path):
        task_id, score = row.get("task_id") or row.get("gts"), row.get("score")
        if not isinstance(task_id, str):
            raise JsonLinesError(f"{where}: a dump row needs a task id ('task_id' or 'gts')")
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise JsonLinesError(f"{where}: the score of {task_id} is {score!r}, not a finite number")
        if task_id in first_line:
            raise JsonLinesError(
                f"{where}: a second row for {task_id} (the first is at {first_line[task_id]}); "
                "a dump holds one row per task"
            )
        first_line[task_id] = where
        rows.append((where, row))
    return rows


def read_dump(path: Path) -> SplitScore:
    """Score one `{step}.jsonl` dump written by verl's `_validate`."""
    return score_rows(dump_rows(path), int(path.stem))


def validation_history(validation_dir: Path) -> dict[int, SplitScore]:
    """Every step's val score in `validation_dir` ({step}.jsonl files), by step."""
    dumps = sorted(
        Path(validation_dir).glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1
    )
    return {score.step: score for score in (read_dump(p) for p in dumps if p.stem.isdigit())}


def val_endings(run: Path) -> list[dict[str, Any]]:
    """Per validation step, how its greedy episodes ended (seal/results/endings.py): the episodes, the shares
    that ended in a loop and at the call limit, and the replies an episode took. Only dumps whose every row
    carries its replies, cut and action log (the trainer's own) have a row; a loop learnt in training shows
    here as the pass rate falls."""
    rows = []
    dumps = sorted((int(p.stem), p) for p in (run / "validation").glob("*.jsonl") if p.stem.isdigit())
    for step, path in dumps:
        shares = ending_shares([dump_row_ending(row, where) for where, row in dump_lines(path)])
        if shares is None:
            continue
        rows.append(
            {
                "step": step,
                "n": int(shares["n"]),
                "loops": round(shares["looped"], 4),
                "call limit": round(shares["call_limit"], 4),
                "replies an episode": round(shares["llm_calls"], 2),
            }
        )
    return rows


def val_scores(run: Path) -> list[SplitScore]:
    history = validation_history(run / "validation")
    if not history:
        raise RunError(f"{run / 'validation'} holds no {{step}}.jsonl validation dump")
    return [history[step] for step in sorted(history)]


def test_scores(run: Path) -> list[tuple[str, SplitScore]]:
    """("best", score) and ("last", score) from the tested checkpoints; empty before `--test` ran."""
    report_path = run / REPORT_NAME
    if not report_path.is_file():
        return []
    try:
        selection = json.loads(report_path.read_text(encoding="utf-8"))["selection"]
        steps = {which: int(selection[f"{which}_step"]) for which in ("best", "last")}
    except (ValueError, RecursionError, KeyError, TypeError) as exc:
        raise RunError(f"{report_path}: not a test report ({type(exc).__name__}: {exc})") from None
    return [
        (which, read_dump(run / "test" / f"{CHECKPOINT_PREFIX}{step}" / f"{step}.jsonl"))
        for which, step in steps.items()
    ]


def model_scores(folder: Path) -> list[tuple[str, SplitScore]]:
    """(split, score) per split of the last validation dump in `folder/validation` that the dump holds rows
    of (each row's `split`, else its task id's), in the order train, val, test."""
    dumps = sorted(
        (p for p in (folder / "validation").glob("*.jsonl") if p.stem.isdigit()), key=lambda p: int(p.stem)
    )
    if not dumps:
        raise RunError(f"--sft: {folder / 'validation'} holds no {{step}}.jsonl validation dump")
    rows = dump_rows(dumps[-1])
    scores = []
    for split in SPLITS:
        kept = [
            row
            for row in rows
            if (row.get("split") or split_of(row.get("task_id") or row.get("gts"))) == split
        ]
        if kept:
            scores.append((split, score_rows(kept, int(dumps[-1].stem))))
    if not scores:
        raise RunError(f"--sft: {dumps[-1]} holds no BFCL task of a split")
    return scores


def best_val_step(scores: Sequence[SplitScore]) -> SplitScore:
    """The highest val Avg, earliest on a tie (the launcher's selection also requires a checkpoint)."""
    return max(scores, key=lambda score: (score.mean, -score.step))


def table_rows(
    val: Sequence[SplitScore],
    test: Sequence[tuple[str, SplitScore]],
    beside: Sequence[tuple[str, str, SplitScore]] = (),
) -> list[dict[str, Any]]:
    """The run's val rows per step, its tested checkpoints, then (name, split, score) of models beside it."""
    rows = [_row("val", score, "") for score in val]
    rows += [_row("test", score, which) for which, score in test]
    return rows + [_row(split, score, name) for name, split, score in beside]


def _row(split: str, score: SplitScore, checkpoint: str) -> dict[str, Any]:
    rates = {SHORT_NAMES[c]: round(100 * score.by_category.get(c, float("nan")), 2) for c in CATEGORIES}
    return {
        "split": split,
        "step": score.step,
        "checkpoint": checkpoint,
        **rates,
        "Avg": round(100 * score.mean, 2),
        "n": score.n,
    }


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    cells = [COLUMNS, *([_cell(row[c]) for c in COLUMNS] for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths, strict=True)) for line in cells)


def _cell(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def training_steps(path: Path) -> dict[int, dict[str, Any]]:
    """`seal_steps.jsonl` by step (a resumed run appends the steps it re-ran: the last record wins)."""
    if not path.is_file():
        return {}
    steps = {}
    for where, record in json_objects(path):
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise JsonLinesError(f"{where}: not a step record (its 'step' is {step!r:.40})")
        steps[step] = record
    return steps


def label_shares(run: Path) -> dict[int, dict[str, float]]:
    """Per training step, each label's share of the batch's ground-truth turns (judge failures left out).

    `seal_steps.jsonl` holds C_t after every step; a resumed run appends the steps it re-ran, and the
    last record of a step wins. A step's batch is the growth of C_t's running total since the step before.
    """
    path = run / STEPS_FILE
    if not path.is_file():
        return {}
    totals: dict[int, dict[str, int]] = {}
    for where, record in json_objects(path):
        try:
            step, labels = record["step"], record["profile"]["total"]["labels"]
        except (KeyError, TypeError):
            raise RunError(f"{where}: not a step record (no step and profile.total.labels)") from None
        counts_ok = isinstance(labels, dict) and all(
            isinstance(n, int) and not isinstance(n, bool) for n in labels.values()
        )
        if isinstance(step, bool) or not isinstance(step, int) or not counts_ok:
            raise RunError(f"{where}: not a step record (step {step!r:.40}, label counts {labels!r:.60})")
        totals[step] = labels
    shares: dict[int, dict[str, float]] = {}
    before: dict[str, int] = {}
    for step in sorted(totals):
        grown = {
            label: count - before.get(label, 0)
            for label, count in totals[step].items()
            if label not in EXCLUDED and count > before.get(label, 0)
        }
        size = sum(grown.values())
        shares[step] = {label: n / size for label, n in sorted(grown.items())} if size else {}
        before = totals[step]
    return shares


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)


def val_curves_figure(
    val: Sequence[SplitScore], test: Sequence[tuple[str, SplitScore]], best: SplitScore, title: str
) -> Any:
    """Val pass rate per category and Avg at every validation step, each category in its own marker and
    line style and dodged a little sideways, so equal curves stay visible; the tested checkpoints' test
    pass rates as markers at their steps (hollow: per category, filled: Avg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = [score.step for score in val]
    spacing = min((b - a for a, b in pairwise(steps)), default=1)
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    colours = {}
    for k, category in enumerate(CATEGORIES):
        rates = [100 * score.by_category.get(category, float("nan")) for score in val]
        marker, linestyle = CATEGORY_STYLES[k % len(CATEGORY_STYLES)]
        dodge = (k - (len(CATEGORIES) - 1) / 2) * DODGE * spacing
        (line,) = ax.plot(
            [step + dodge for step in steps],
            rates,
            marker=marker,
            linestyle=linestyle,
            markersize=4,
            label=f"val {SHORT_NAMES[category]}",
        )
        colours[category] = line.get_color()
    ax.plot(steps, [100 * score.mean for score in val], color="black", linewidth=2.2, label="val Avg")
    ax.axvline(best.step, color="grey", linestyle=":", label=f"best val (step {best.step})")
    for (which, score), marker in zip(test, TEST_MARKERS, strict=False):
        for category, rate in score.by_category.items():
            ax.plot(score.step, 100 * rate, marker, mfc="none", mec=colours.get(category, "grey"), ms=8)
        label = f"test Avg, {CHECKPOINT_NAMES[which]} (step {score.step})"
        ax.plot(score.step, 100 * score.mean, marker, color="black", ms=8, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training step")
    ax.set_ylabel("pass rate (%)")
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    return fig


def label_shares_figure(shares: dict[int, dict[str, float]], title: str) -> Any:
    """Each training step's label shares, stacked in `label_order` (the legend lists them top first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    steps = sorted(shares)
    labels = label_order(label for s in steps for label in shares[s])
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.stackplot(
        steps,
        [[shares[s].get(label, 0.0) for s in steps] for label in labels],
        labels=labels,
        colors=[colour_of(label) for label in labels],
        step="mid",
    )
    ax.set_xlim(steps[0] - 0.5, steps[-1] + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, 1)
    ax.set_xlabel("training step")
    ax.set_ylabel("share of the batch's ground-truth turns")
    ax.set_title(title)
    legend_as_stacked(ax)
    fig.tight_layout()
    return fig


def save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(run: Path, out: Path, beside: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """Print the tables, write the CSVs and charts; return the pass-rate rows."""
    if not run.is_dir():
        raise RunError(f"no such folder: {run}")
    val = val_scores(run)
    test = test_scores(run)
    others = [(folder.name, split, score) for folder in beside for split, score in model_scores(folder)]
    shares = label_shares(run)
    rows = table_rows(val, test, others)
    best = best_val_step(val)
    if out.exists() and not out.is_dir():
        raise RunError(f"--out {out} is a file; name a folder")
    out.mkdir(parents=True, exist_ok=True)
    print(f"{run}: pass rates (%) per category; Avg is their mean, as in the paper")
    print(format_table(rows))
    print(f"best val: step {best.step} (Avg {100 * best.mean:.2f})")
    ended = val_endings(run)
    if ended:
        print(f"how the greedy val episodes ended (loops: the last {LOOP_CALLS} replies one identical call)")
        shown = [row | {key: f"{row[key]:.0%}" for key in ("loops", "call limit")} for row in ended]
        print(pd.DataFrame(shown).to_string(index=False))
        write_csv(out / "val_endings.csv", list(ended[0]), ended)
    write_csv(out / "pass_rates.csv", COLUMNS, rows)
    save(val_curves_figure(val, test, best, f"{run.name}: pass rate per category"), out / "val_curves.png")
    if shares:
        labels = sorted({label for step in shares.values() for label in step})
        share_rows = [
            {"step": s, **{label: round(shares[s].get(label, 0.0), 4) for label in labels}} for s in shares
        ]
        write_csv(out / "label_shares.csv", ["step", *labels], share_rows)
        title = f"{run.name}: labels of the training batches"
        save(label_shares_figure(shares, title), out / "label_shares.png")
    else:
        print(f"no {STEPS_FILE} in {run}: no label-share chart (the run has not trained a step yet)")
    print(f"wrote {out}")
    print(f"episodes turn by turn (an offline HTML page): seal view {run}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run", type=Path, help="the run folder, e.g. experiments/SEAL")
    source.add_argument(
        "--ood",
        nargs="+",
        metavar="NAME=DIR",
        help="Table 2 from each model's seal eval OOD folders, e.g. base=DIR vanilla=DIR seal=DIR",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write (default: RUN/stats; with --ood: print only)"
    )
    parser.add_argument(
        "--sft",
        type=Path,
        nargs="+",
        default=[],
        help="run folders of validation-only launches (an SFT model, the base model), shown beside the run",
    )
    args = parser.parse_args(argv)
    try:
        if args.ood:
            print(table2.report(table2.parse_models(args.ood), args.out), end="")
            return 0
        report(args.run, args.out or args.run / "stats", args.sft)
    except (ValueError, KeyError, OSError) as exc:
        print(f"stats_validation_bfcl: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
