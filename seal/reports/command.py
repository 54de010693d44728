"""`seal report`: what a training run did, read from its folder (experiments/<name>/).

    seal report experiments/SEAL                        # val and test pass rates per category, Avg, charts
    seal report experiments/SEAL --sft experiments/sft_eval   # with validation-only launches beside it
    seal report experiments/SEAL experiments/vanilla --steps  # per step: timings, reward, A-Patch, ρ, Ω
    seal report --ood base=runs/ood/base seal=runs/ood/seal    # the paper's Table 2 from OOD evaluations
    seal report runs/eval_val                           # a `seal eval` folder: pass rates, cuts, loops

Without --steps: per run, the val pass rate of every validated step and the test pass rate of the tested
checkpoints (Avg is their mean, as in the paper), written with curves and label shares into --out
(`seal.reports.runs`; `scripts/stats_validation_bfcl.py --run RUN` is the same view). With --steps: verl's
and SEAL's numbers per training step from the metrics files, two runs side by side (`seal.reports.steps`;
`scripts/step_table.py` is the same view). With --ood NAME=DIR: models' `seal eval --suite` folders side by
side in the shape of the paper's Table 2 (`seal.reports.table2`; --out also writes table2.md and
table2.json). A `seal eval --out` folder given as RUN is read as one (`seal.reports.eval_folder`): pass rate
and label shares per category, the episodes each limit cut and those that end in a loop. The pass-rate report
ends with the `seal view` command that shows the runs' episodes turn by turn. Exit status: 0 done, 1 a folder
is missing or cannot be read, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seal.flags import command_parser

PROG = "seal report"
HELP = "pass rates and per-step numbers of training runs"


def make_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of `seal report`, standalone or as a sub-command of `seal` (`subparsers`)."""
    parser = command_parser(subparsers, "report", prog=PROG, help=HELP, description=__doc__)
    parser.add_argument(
        "runs",
        nargs="*",
        type=Path,
        metavar="RUN",
        help="run folder(s), e.g. experiments/SEAL, or seal eval output folder(s); at most two",
    )
    parser.add_argument("--steps", action="store_true", help="the per-step table instead of the pass rates")
    parser.add_argument(
        "--out",
        type=Path,
        help="where the pass-rate CSVs and charts go (default: RUN/stats; two runs: OUT/<name>)",
    )
    parser.add_argument(
        "--ood",
        nargs="+",
        metavar="NAME=DIR",
        help="instead of runs: Table 2 from each model's seal eval OOD folders, e.g. base=DIR seal=DIR",
    )
    parser.add_argument(
        "--sft",
        type=Path,
        nargs="+",
        default=[],
        metavar="FOLDER",
        help="run folders of validation-only launches (an SFT model, the base model), shown beside each run",
    )
    parser.set_defaults(handler=main, parser=parser)
    return parser


def main(args: argparse.Namespace) -> int:
    """Print (and, for pass rates, write) the report of `args.runs`."""
    if bool(args.runs) == bool(args.ood):
        args.parser.error("give one run or two (RUN [RUN2]), or --ood NAME=DIR ...")
    if len(args.runs) > 2:
        args.parser.error("give one run, or two to compare")
    if args.steps and (args.out is not None or args.sft):
        args.parser.error("--out and --sft belong to the pass-rate report, not to --steps")
    missing = next((run for run in args.runs if not run.is_dir()), None)
    if missing is not None:
        print(f"seal report: no such folder: {missing}", file=sys.stderr)
        return 1
    try:
        if args.ood:
            from seal.reports import table2

            print(table2.report(table2.parse_models(args.ood), args.out), end="")
        elif args.steps:
            from seal.reports.steps import print_steps

            print_steps(args.runs)
        else:
            from seal.reports.eval_folder import is_eval_folder, report_eval
            from seal.reports.runs import report

            for run in args.runs:
                out = run / "stats" if args.out is None else args.out
                out = out / run.name if len(args.runs) == 2 and args.out else out
                if is_eval_folder(run):
                    print(report_eval(run, out), end="")
                    print(f"wrote {out}")
                else:
                    report(run, out, args.sft)
    except (ValueError, KeyError, OSError) as exc:
        print(f"seal report: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    return 0
