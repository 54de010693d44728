"""Training runs side by side, grouped by arm across seeds: is one arm's gain larger than the seeds' spread?

    python scripts/compare_runs.py experiments/learn_seal_s{1,2,3} experiments/learn_vanilla_s{1,2,3}
    python scripts/compare_runs.py RUN... --out DIR [--records launcher_record]

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
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from seal.reports.compare import ComparisonError, compare


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="compare_runs.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (experiments/<name>)")
    parser.add_argument("--out", type=Path, help="where to write (default: comparison/ beside the first run)")
    parser.add_argument(
        "--records", type=Path, help="the launcher_record folder (default: the one beside experiments/)"
    )
    args = parser.parse_args(argv)
    out = args.out or args.runs[0].resolve().parent / "comparison"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = compare(args.runs, out, args.records)
    except ComparisonError as exc:
        print(f"compare_runs: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    print(result.text)
    for warning in caught:
        print(f"warning: {warning.message}")
    print(f"wrote {', '.join(str(path) for path in result.files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
