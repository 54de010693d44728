"""The `seal` command: serve the environment, evaluate an endpoint, replay or diagnose logs, build data,
report on training runs, view episodes, train."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from seal.flags import add_flags, comma_list, settings_from_flags
from seal.reports.command import HELP as report_help
from seal.tocf.labels import DEFAULT_PRIORITY, DEFAULT_TAXONOMY, TAXONOMIES, labels_explained
from seal.trainer.launch.command import HELP as train_help
from seal.view.command import HELP as view_help


def _fail(message: str) -> int:
    print(f"seal: {message}", file=sys.stderr)
    return 2


def _replay_logs(args: argparse.Namespace, with_labels: bool) -> tuple[list[dict], list[dict], int]:
    """The validated action logs of `--input` that replayed, their result lines, and the exit status (0: some
    replayed; each one that could not is skipped with a line on standard error)."""
    from seal.env.replay import ActionLogError, read_action_logs, replay
    from seal.results.tables import episode_record

    try:
        logs = read_action_logs(args.input)
    except ActionLogError as exc:
        return [], [], _fail(str(exc))
    replayed, records = [], []
    for number, log in enumerate(tqdm(logs, desc="replaying", unit="episode", disable=None), 1):
        try:
            result = replay(log, taxonomy=args.taxonomy, priority=args.priority)
        except Exception as exc:  # one episode the environment cannot replay must not refuse the rest
            reason = " ".join(str(exc).split()) or type(exc).__name__
            print(
                f"seal: skipped log {number} ({log['task_id']}): cannot replay it ({reason})", file=sys.stderr
            )
            continue
        replayed.append(log)
        records.append(episode_record(result, with_labels=with_labels))
    if not records:
        return [], [], _fail(f"{args.input}: no action log could be replayed")
    return replayed, records, 0


def cmd_replay(args: argparse.Namespace) -> int:
    if args.out is not None:
        if args.out.is_dir():
            return _fail(f"--out {args.out} is a folder; name the JSONL file to write")
        if args.out.exists() and not args.force:
            return _fail(f"{args.out} exists; pass --force to overwrite it")
    _, records, code = _replay_logs(args, with_labels=args.labels)
    if code:
        return code
    lines = "".join(json.dumps(record) + "\n" for record in records)
    if args.out is None:
        sys.stdout.write(lines)
    else:
        try:
            args.out.write_text(lines, encoding="utf-8")
        except OSError as exc:
            return _fail(f"cannot write --out {args.out}: {exc.strerror}")
    from seal.results.pass_rate import passed

    count = sum(passed(record["reward"]) for record in records)
    print(f"{count}/{len(records)} episodes pass", file=sys.stderr)
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from seal.results.tables import markdown_table, plot_label_shares, run_name, summarize

    if args.out.exists() and not args.out.is_dir():
        return _fail(f"--out {args.out} is a file; name a folder to write the diagnosis into")
    target = args.out / "episodes.jsonl"
    if target.exists() and not args.force:
        return _fail(f"{target} exists; pass --force to overwrite it or choose another --out")
    logs, records, code = _replay_logs(args, with_labels=True)
    if code:
        return code
    summary = summarize(records)
    table = markdown_table(summary)
    title = f"Turn labels ({args.taxonomy} taxonomy) — {run_name(args.input)}"
    outputs = {
        target: "".join(json.dumps(record) + "\n" for record in records),
        args.out / "actions.jsonl": "".join(json.dumps(log) + "\n" for log in logs),
        args.out / "summary.md": f"# Diagnosis of {args.input}\n\nTaxonomy: `{args.taxonomy}`\n\n{table}",
        args.out / "summary.json": json.dumps(summary, indent=2) + "\n",
    }
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        for path, text in outputs.items():
            path.write_text(text, encoding="utf-8", errors="backslashreplace")
        plot_label_shares(summary, args.out / "labels.png", title=title)
    except OSError as exc:
        return _fail(f"cannot write into --out {args.out}: {exc.strerror or exc}")
    print(table)
    print(
        f"wrote {target}, {args.out / 'summary.md'}, {args.out / 'labels.png'}, {args.out / 'actions.jsonl'}"
    )
    print(f"episodes turn by turn: seal view {args.out}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from env_service.app import BindError, ServiceSettings, serve

    try:
        settings = settings_from_flags(ServiceSettings, args)
    except ValueError as exc:
        return _fail(str(exc))
    try:
        serve(settings)
    except BindError as exc:
        print(f"seal serve: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from seal.dataset import main as dataset_main

    return dataset_main(["--check"] if args.check else [])


def cmd_eval(args: argparse.Namespace) -> int:
    from seal.evaluation.suites import run_eval

    return run_eval(args)


def _add_replay_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path, required=True, help="action logs, one JSON object per line")
    parser.add_argument(
        "--taxonomy",
        choices=TAXONOMIES,
        default=DEFAULT_TAXONOMY,
        help=f"label taxonomy (docs/design.md §4.1; default {DEFAULT_TAXONOMY})",
    )
    parser.add_argument(
        "--priority",
        type=comma_list,
        help=f"paper taxonomy: comma-separated failure order (default {','.join(DEFAULT_PRIORITY)})",
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing outputs")


def _serve(commands: Any, argv: Sequence[str]) -> None:
    from env_service.app import ServiceSettings

    serve = commands.add_parser("serve", help=COMMANDS["serve"])
    add_flags(serve, ServiceSettings)
    serve.set_defaults(handler=cmd_serve)


def _eval(commands: Any, argv: Sequence[str]) -> None:
    from seal.evaluation.suites import add_suite_arguments, suite_named

    evaluate = commands.add_parser("eval", help=COMMANDS["eval"])
    add_suite_arguments(evaluate, suite_named(argv))
    evaluate.set_defaults(handler=cmd_eval)


def _replay(commands: Any, argv: Sequence[str]) -> None:
    replay = commands.add_parser("replay", help=COMMANDS["replay"])
    _add_replay_options(replay)
    replay.add_argument("--out", type=Path, help="output JSONL (default: standard output)")
    replay.add_argument("--labels", action="store_true", help="include labels, profile and evidence")
    replay.set_defaults(handler=cmd_replay)


def _diagnose(commands: Any, argv: Sequence[str]) -> None:
    diagnose = commands.add_parser(
        "diagnose",
        help=COMMANDS["diagnose"],
        epilog=f"labels (taxonomy: meaning):\n{labels_explained()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_replay_options(diagnose)
    diagnose.add_argument("--out", type=Path, required=True, help="output folder")
    diagnose.set_defaults(handler=cmd_diagnose)


def _data(commands: Any, argv: Sequence[str]) -> None:
    data = commands.add_parser("data", help=COMMANDS["data"])
    data.add_argument(
        "--check",
        action="store_true",
        help="write nothing: check that each file exists and equals a fresh build of its split",
    )
    data.set_defaults(handler=cmd_data)


def _report(commands: Any, argv: Sequence[str]) -> None:
    from seal.reports.command import make_parser

    make_parser(commands)


def _view(commands: Any, argv: Sequence[str]) -> None:
    from seal.view.command import make_parser

    make_parser(commands)


def _train(commands: Any, argv: Sequence[str]) -> None:
    from seal.trainer.launch.command import make_parser

    make_parser(commands)


COMMANDS = {
    "serve": "run the BFCL environment service (FastAPI)",
    "eval": "score an OpenAI-compatible endpoint on a BFCL split or an out-of-distribution suite",
    "replay": "replay action logs; one result line per episode",
    "diagnose": "label action logs turn by turn, with a table and a chart",
    "data": "write (or --check) data/bfcl_{train,val,test}.parquet",
    "report": report_help,
    "view": view_help,
    "train": train_help,
}
"""Each command and its one-line help; `PARSERS` adds its options."""
PARSERS: dict[str, Callable[[Any, Sequence[str]], None]] = {
    "serve": _serve,
    "eval": _eval,
    "replay": _replay,
    "diagnose": _diagnose,
    "data": _data,
    "report": _report,
    "view": _view,
    "train": _train,
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """`seal`'s parser for the command line `argv`, with the options of the command it names only (and, for
    `seal eval`, of the `--suite` it names): a command's options import what the command needs (FastAPI,
    the evaluation stack), so `seal train --help` answers without any of it."""
    command = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = argparse.ArgumentParser(prog="seal", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, help in COMMANDS.items():
        if name == command:
            PARSERS[name](commands, argv)
        else:
            commands.add_parser(name, help=help)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
