"""`seal view`: one self-contained HTML page of episodes, turn by turn, with SEAL's diagnosis.

    seal view runs/eval_qwen                        # a `seal eval` output -> runs/eval_qwen/view.html
    seal view experiments/SEAL --out seal_run.html  # a training run: every validation dump, test passes
    seal view runs/base runs/seal --out both.html   # two folders, to compare a task side by side
    seal view examples                              # action logs and a run (scripts/make_examples.py)

Reads any folder the project writes: a `seal eval` output (actions.jsonl, episodes.jsonl), a `seal diagnose`
output, a folder of action logs (actions.jsonl), a training run (validation/{step}.jsonl at every validated
step, test/global_step_N/N.jsonl, seal_steps.jsonl), or a folder holding such folders. Each conversation is
rebuilt by replaying its action log through the environment (eval mode, deterministic); where a replay
disagrees with the recorded reward, labels or evidence the page says so. The page needs no server and no
network: open it from a shared disk in any browser. Exit status: 0 written, 1 a folder cannot be read or
the page cannot be written, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from seal.flags import command_parser

PROG = "seal view"
HELP = "one offline HTML page of episodes turn by turn (eval, diagnose, training-run folders)"
PAGE_NAME = "view.html"
"""The page's name in the first folder when --out is not given."""


def make_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of `seal view`, standalone or as a sub-command of `seal` (`subparsers`)."""
    parser = command_parser(subparsers, "view", prog=PROG, help=HELP, description=__doc__)
    parser.add_argument(
        "folders",
        nargs="+",
        type=Path,
        metavar="DIR",
        help="seal eval / seal diagnose output, training run folder, folder of action logs "
        "(actions.jsonl), or a folder holding such folders",
    )
    parser.add_argument(
        "--out", type=Path, help=f"the HTML file to write (default: DIR/{PAGE_NAME} of the first DIR)"
    )
    parser.add_argument("--title", help="the page's title (default: the folders' names)")
    parser.set_defaults(handler=main, parser=parser)
    return parser


def main(args: argparse.Namespace) -> int:
    """Read the folders, replay their episodes, write the page."""
    from seal.view.episodes import build
    from seal.view.page import write_page
    from seal.view.sources import ViewInputError, read_sources

    out = args.out or args.folders[0] / PAGE_NAME
    if out.is_dir():
        args.parser.error(f"--out {out} is a folder; name the HTML file to write")
    try:
        data = build(read_sources(args.folders))
        title = args.title or "SEAL episodes: " + ", ".join(
            folder.name or folder.resolve().name for folder in args.folders
        )
        size = write_page(data, title, out)
    except ViewInputError as exc:
        print(f"{PROG}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{PROG}: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    disagree = data.disagreements
    print(
        f"wrote {out} ({size / 1e6:.2f} MB): {len(data.rows)} episodes from {len(data.sources)} source(s)"
        + (f"; {disagree} replay(s) disagree with the record (marked in the page)" if disagree else "")
    )
    return 0
