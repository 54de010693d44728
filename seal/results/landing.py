"""Landing a node's results in a model's results folder (results/<model>/), so that nobody edits its JSON
Lines by hand: each sitting's archive (`gpu/gpu_qwen_compare.sh`'s `sitting_ARM_sSEED.tar.gz`) unpacked into
its `files` folder and its line put in `runs.jsonl` (replacing the line of the same arm and seed: a sitting
run again replaces its line), and the SFT starts in `sft_starts.jsonl`: the lines `starts` wrote
(`experiments/qwen/starts.jsonl`), and for a sitting's start that no such line measured, a line of what its
sitting measured (greedy val, and test before the first step; no mixed share). A scored start without a
test pass of its own gains its sitting's (`test_before`). A start line measuring what a line already in the
file measured (the same run, length, GPU count and commit) replaces it, so landing twice changes nothing.
Everything is read and checked before anything is written; a bad archive or line is one line naming it, and
the folder is left as it was.

    python -m seal.results.landing --results results/qwen_coder_1_5b sitting_full_loop_s1.tar.gz \\
        --starts experiments/qwen/starts.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from seal.jsonl import JsonLinesError, json_objects
from seal.results.campaign import (
    METRICS,
    RUNS,
    SFT_STARTS,
    CampaignError,
    Record,
    SftStart,
    Sitting,
    parse_record,
)

RESULT = "result.json"
"""In a sitting's archive, beside its metrics: the sitting's line as its driver wrote it."""
SFT_METRICS = "sft_metrics.jsonl"
"""In a sitting's archive: the start's training metrics, whose last step is the start's length."""
SFT_RECIPE = Path("exp/sft_qwen.yaml")
"""The recipe every sitting trains its start with, unchanged (`gpu/gpu_qwen_compare.sh`'s `train_start`)."""

Line = dict[str, Any]


class LandingError(ValueError):
    """An archive, a starts file or a results folder that cannot be landed; the message is one line."""


@dataclasses.dataclass(frozen=True)
class SittingArchive:
    """One sitting's archive as read: its line (as written, and typed) and its files by path in its folder."""

    path: Path
    line: Line
    sitting: Sitting
    files: dict[PurePosixPath, bytes]


@dataclasses.dataclass(frozen=True)
class Landing:
    """What one call changes: the results folder's two files as they will read, the files to unpack, and a
    line per change for the person who ran it."""

    runs: list[Line]
    starts: list[Line]
    unpack: dict[Path, bytes]
    report: list[str]


def _parsed(kind: type[Record], value: Any, where: str) -> Record:
    try:
        return parse_record(kind, value, where)
    except CampaignError as exc:
        raise LandingError(str(exc)) from None


def _members(path: Path, model: str) -> tuple[str, dict[PurePosixPath, bytes]]:
    """The one folder under results/<model>/ that the archive holds, and its files' bytes."""
    files: dict[PurePosixPath, bytes] = {}
    folders = set()
    try:
        with tarfile.open(path, "r:gz") as archive:
            for member in archive.getmembers():
                name = PurePosixPath(member.name)
                if name.is_absolute() or ".." in name.parts:
                    raise LandingError(f"{path}: member {member.name} points outside the project")
                if member.isdir():
                    continue
                if not member.isfile():
                    raise LandingError(f"{path}: member {member.name} is not a plain file")
                if name.parts[:2] != ("results", model) or len(name.parts) < 4:
                    raise LandingError(f"{path}: member {member.name} is not under results/{model}/<folder>/")
                folders.add(name.parts[2])
                data = archive.extractfile(member)
                files[PurePosixPath(*name.parts[3:])] = data.read() if data is not None else b""
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise LandingError(f"{path}: not a readable .tar.gz ({' '.join(str(exc).split())})") from None
    if len(folders) != 1:
        raise LandingError(f"{path}: holds {len(folders)} sitting folders under results/{model}/, not one")
    return folders.pop(), files


def read_archive(path: Path, model: str) -> SittingArchive:
    """The sitting in `path`: its line, checked, and its files, all under `results/<model>/<its files>/`."""
    folder, files = _members(path, model)
    where = f"{path}: results/{model}/{folder}/{RESULT}"
    if PurePosixPath(RESULT) not in files:
        raise LandingError(f"{where}: missing")
    try:
        line = json.loads(files[PurePosixPath(RESULT)])
    except ValueError as exc:
        raise LandingError(f"{where}: not JSON ({exc})") from None
    sitting = _parsed(Sitting, line, where)
    if sitting.files != folder:
        raise LandingError(f"{where}: files says {sitting.files}, but the archive's folder is {folder}")
    if not any(p.parent == PurePosixPath(METRICS) and p.suffix == ".jsonl" for p in files):
        raise LandingError(f"{path}: no {METRICS}/*.jsonl in results/{model}/{folder}/")
    return SittingArchive(path, line, sitting, files)


def checked_lines(path: Path, kind: type[SftStart] | type[Sitting]) -> list[Line]:
    """The JSON Lines file's lines as written, each checked to be a whole `kind`; a missing file has none."""
    if not path.exists():
        return []
    try:
        lines = list(json_objects(path))
    except JsonLinesError as exc:
        raise LandingError(str(exc)) from None
    for where, value in lines:
        _parsed(kind, value, where)
    return [value for _, value in lines]


def read_starts(path: Path) -> list[Line]:
    """The start lines `starts` wrote."""
    if not path.is_file():
        raise LandingError(f"{path}: no such starts file")
    return checked_lines(path, SftStart)


def shipped_steps(recipe: Path) -> int:
    """The recipe's length as shipped: a start of another length says so in its recipe."""
    try:
        return int(yaml.safe_load(recipe.read_text(encoding="utf-8"))["trainer"]["total_training_steps"])
    except (OSError, KeyError, TypeError, ValueError, yaml.YAMLError) as exc:
        raise LandingError(f"{recipe}: no trainer.total_training_steps to read ({exc})") from None


def _start_steps(archive: SittingArchive) -> int:
    """The start's length: the last step its training metrics logged."""
    steps = []
    for text in archive.files.get(PurePosixPath(SFT_METRICS), b"").decode(errors="replace").splitlines():
        try:
            steps.append(int(json.loads(text)["step"]))
        except (ValueError, KeyError, TypeError):
            continue
    if not steps:
        raise LandingError(f"{archive.path}: no step in its {SFT_METRICS} (the start's length)")
    return max(steps)


def start_of_sitting(archive: SittingArchive, recipe_steps: int) -> Line:
    """The sitting's start as its arm's launch measured it: greedy val, and test before the first step."""
    sitting = archive.sitting
    steps = _start_steps(archive)
    length = "" if steps == recipe_steps else f" trainer.total_training_steps={steps}"
    start = {
        "recipe": f"{SFT_RECIPE}{length}",
        "experiment": f"sft_qwen_s{sitting.seed}",
        "card": sitting.card,
        "gpus": sitting.sft_gpus if sitting.sft_gpus is not None else sitting.gpus,
        "steps": steps,
        "val": sitting.sft_val,
        "val_by_category": sitting.sft_val_by_category,
        "train_s": (archive.line.get("phases") or {}).get("sft", 0),
        "score_s": None,
        "date": sitting.date,
        "commit": sitting.commit,
    }
    return with_sitting_test(start, [sitting])


def with_sitting_test(start: Line, sittings: Sequence[Sitting]) -> Line:
    """A start with no test pass of its own takes the one its sitting played before the first step."""
    if start.get("test") is not None:
        return start
    for sitting in sittings:
        same = start["experiment"] == f"sft_qwen_s{sitting.seed}" and start["commit"] == sitting.commit
        if same and sitting.test_before is not None:
            return start | {"test": sitting.test_before, "test_by_category": sitting.test_before_by_category}
    return start


def start_key(start: Line) -> tuple[str, int, int, str]:
    """What makes two start lines one measurement: the run, its length, its GPU count and its code."""
    return (start["experiment"], start["steps"], start["gpus"], start["commit"])


def _start_report(verb: str, start: Line) -> str:
    mixed = "mixed not measured" if start.get("mixed") is None else f"mixed {start['mixed']:.2f}"
    where = f"{start['gpus']} GPU(s), val {start['val']:.2f}, {mixed}"
    return f"sft_starts.jsonl: {verb} {start['experiment']} ({where})"


def _unpacked(results: Path, archive: SittingArchive) -> dict[Path, bytes]:
    """The archive's files at their places in the results folder; a file there with other bytes stops it."""
    unpack = {}
    for name, data in archive.files.items():
        target = results / archive.sitting.files / Path(*name.parts)
        if target.exists() and target.read_bytes() != data:
            raise LandingError(f"{target} exists with other content; move it away to land {archive.path}")
        unpack[target] = data
    return unpack


def plan(results: Path, archives: Sequence[SittingArchive], scored: Sequence[Line], recipe: Path) -> Landing:
    """The landing, computed without writing: lines replaced or added and files to unpack."""
    runs, starts = checked_lines(results / RUNS, Sitting), checked_lines(results / SFT_STARTS, SftStart)
    report: list[str] = []
    unpack: dict[Path, bytes] = {}
    named = [(archive.sitting.arm, archive.sitting.seed) for archive in archives]
    for archive in archives:
        arm, seed = archive.sitting.arm, archive.sitting.seed
        if named.count((arm, seed)) > 1:
            raise LandingError(f"{archive.path}: another archive named here holds {arm} seed {seed} too")
        unpack |= _unpacked(results, archive)
        kept = [line for line in runs if (line.get("arm"), line.get("seed")) != (arm, seed)]
        report.append(
            f"runs.jsonl: {'replaced' if len(kept) < len(runs) else 'added'} {arm} seed {seed} "
            f"({archive.sitting.files})"
        )
        runs = [*kept, archive.line]
    landed = [with_sitting_test(start, [archive.sitting for archive in archives]) for start in scored]
    recipe_steps = shipped_steps(recipe) if archives else 0
    for archive in archives:
        derived = start_of_sitting(archive, recipe_steps)
        if all(start_key(start) != start_key(derived) for start in landed):
            landed.append(derived)
    for start in landed:
        _parsed(SftStart, start, f"the start {start['experiment']}")
        index = next((i for i, line in enumerate(starts) if start_key(line) == start_key(start)), None)
        if index is None:
            starts.append(start)
        else:
            starts[index] = start
        report.append(_start_report("added" if index is None else "replaced", start))
    return Landing(runs, starts, unpack, report)


def _write_lines(path: Path, lines: Sequence[Line]) -> None:
    """The whole file at once (a temporary file renamed over it), so a failed write leaves the old one."""
    with tempfile.NamedTemporaryFile(
        "w", dir=path.parent, delete=False, encoding="utf-8", suffix=".tmp"
    ) as out:
        out.write("".join(json.dumps(line) + "\n" for line in lines))
    os.replace(out.name, path)


def land(landing: Landing, results: Path) -> None:
    for target, data in landing.unpack.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    _write_lines(results / RUNS, landing.runs)
    _write_lines(results / SFT_STARTS, landing.starts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seal.results.landing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("archives", nargs="*", type=Path, help="sittings' archives: sitting_ARM_sSEED.tar.gz")
    parser.add_argument("--results", type=Path, required=True, help="the model's results folder")
    parser.add_argument("--starts", type=Path, help="a starts.jsonl that `starts` wrote")
    parser.add_argument(
        "--recipe", type=Path, default=SFT_RECIPE, help=f"the sittings' SFT recipe ({SFT_RECIPE})"
    )
    args = parser.parse_args(argv)
    if not args.archives and args.starts is None:
        parser.error("name a sitting's archive, or --starts")
    try:
        if not args.results.is_dir():
            raise LandingError(f"{args.results}: no such results folder")
        archives = [read_archive(path, args.results.name) for path in args.archives]
        scored = read_starts(args.starts) if args.starts is not None else []
        landing = plan(args.results, archives, scored, args.recipe)
        land(landing, args.results)
    except (LandingError, OSError) as exc:
        print(f"landing: {exc}", file=sys.stderr)
        return 1
    print("\n".join(landing.report))
    print(
        f"then the page: python scripts/compare_runs.py --results {args.results} --page PAGE --readme README"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
