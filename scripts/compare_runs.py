"""Training runs side by side, grouped by arm across seeds: is one arm's gain larger than the seeds' spread?

    python scripts/compare_runs.py experiments/learn_seal_s{1,2,3} experiments/learn_vanilla_s{1,2,3}
    python scripts/compare_runs.py RUN... --out DIR [--records launcher_record]
    python scripts/compare_runs.py RUN... --baseline base=EVAL_DIR --baseline SFT=EVAL_DIR   # Table 1's shape

Each RUN is a run folder (experiments/<name>/: metrics/*.jsonl from verl's file logger,
validation/{step}.jsonl; its launch record launcher_record/<name>/ beside experiments/). Arm and seed come
from the recorded config:
the arm from SEAL's switches (Ω preset, Evolve, A-Patch), the seed from `seed` (or data.seed). Prints, per arm
across seeds: the train reward per step (mean ± std), the greedy val pass rate per category before and after
training with the paper's Avg, the mixed-group share, the A-Patch factor range and Ω's version, then one line
saying whether the arms' val Avg after training differ by more than the spread across seeds. Writes into DIR
(default: comparison/ beside the first run) comparison.md (the same tables in markdown, for a results page,
with each run's command), summary.csv, reward_curves.csv and learning_curves.png (reward per step with ±1 std
bands; val Avg before and after). Exit 1 with one line when a run cannot be read.

--baseline NAME=DIR (repeatable) adds models evaluated on their own, as `seal eval --out DIR` left them (the
base model, the SFT start), and a first table in the shape of the paper's Table 1: per split, each baseline's
pass rate per category and Avg from its episodes, then `+ <arm>` with mean ± std across seeds of the val after
training and, for runs with a test report, the test of the best-val checkpoint. A baseline's split is the one
its run.json names: a test baseline goes to the test rows, never beside val numbers (one NAME may name a val
and a test folder, never two of one split). A malformed NAME=DIR is one line and exit 2; a folder that is not
a seal eval folder one line and exit 1; nothing is written.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from seal.jsonl import JsonLinesError
from seal.reports.compare import ComparisonError, compare
from seal.reports.results_page import PageError, update
from seal.reports.table2 import Table2Error, parse_models
from seal.results.campaign import CampaignError, read_campaign


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare_runs.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="*", type=Path, help="run folders (experiments/<name>)")
    parser.add_argument("--out", type=Path, help="where to write (default: comparison/ beside the first run)")
    parser.add_argument(
        "--records", type=Path, help="the launcher_record folder (default: the one beside experiments/)"
    )
    parser.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="a model's seal eval folder shown above the arms in Table 1, e.g. base=DIR (repeatable)",
    )
    parser.add_argument("--results", type=Path, help="a model's results folder, e.g. results/qwen_coder_1_5b")
    parser.add_argument("--page", type=Path, help="with --results: the page whose generated part to write")
    parser.add_argument("--readme", type=Path, help="with --results: the README whose model row to write")
    parser.add_argument("--check", action="store_true", help="with --results: write nothing, exit 1 if stale")
    args = parser.parse_args(argv)
    if args.results is not None:
        if args.runs or args.out or args.records or args.baseline or args.page is None:
            parser.error("--results takes --page (and --readme, --check), no run folders")
        return results_page(args.results, args.page, args.readme, args.check)
    if not args.runs or args.page or args.readme or args.check:
        parser.error("give run folders, or --results DIR --page PAGE")
    out = args.out or args.runs[0].resolve().parent / "comparison"
    try:
        baselines = [pair for text in args.baseline for pair in parse_models([text]).items()]
    except Table2Error as exc:
        print(f"compare_runs: --baseline: {exc}", file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = compare(args.runs, out, args.records, baselines)
    except ComparisonError as exc:
        print(f"compare_runs: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(result.text)
    for warning in caught:
        print(f"warning: {warning.message}")
    print(f"wrote {', '.join(str(path) for path in result.files)}")
    return 0


def results_page(results: Path, page: Path, readme: Path | None, check: bool) -> int:
    """Generate (or `check`) `page` and `readme` from the result files in `results`."""
    try:
        stale = update(read_campaign(results), page, readme, check)
    except (CampaignError, PageError, ComparisonError, JsonLinesError, OSError) as exc:
        print(f"compare_runs: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for path in stale:
        print(
            f"{path} is stale: run without --check" if check else f"wrote {path}",
            file=sys.stderr if check else sys.stdout,
        )
    if not stale:
        print(f"{page}{' and ' + str(readme) if readme else ''}: up to date")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
