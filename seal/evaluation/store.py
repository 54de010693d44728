"""The output folder of one `seal eval` run: action logs and episode lines, appended as episodes end.

Every finished episode is on disk (flushed) before the next one is reported, so an interrupted run
keeps its work and `--resume` carries on from it. Nothing the user did not ask to replace is
overwritten: a fresh run refuses a folder that already holds results, and a resumed run must match
the model, protocol and taxonomy it continues.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from seal.results.files import ACTIONS, EPISODES, RUN

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
MUST_MATCH = ("model", "protocol", "taxonomy")


class OutputError(RuntimeError):
    """The output folder cannot be used as asked; the message is the one-line explanation."""


@dataclass(frozen=True)
class Resumed:
    """What a resumed run keeps: the episode lines by task id, and how many broken lines it dropped."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    dropped: int = 0


def _is_nonempty(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _parse_lines(path: Path) -> Iterable[dict[str, Any] | None]:
    """Each non-blank line as a JSON object with a string task_id, or None when it is broken
    (an interrupted write leaves a partial last line; a damaged one may not even be UTF-8)."""
    if not path.is_file():
        return
    with path.open("rb") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                value = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):
                yield None
                continue
            yield value if isinstance(value, dict) and isinstance(value.get("task_id"), str) else None


def _dump(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False) + "\n"


def _open_lines(path: Path, mode: str) -> IO[str]:
    """A JSONL file for `_dump`'s lines: UTF-8, and a lone surrogate (not Unicode text, so it has no UTF-8
    form) written as its JSON escape `\\udXXX`, which reads back as the same string."""
    return path.open(mode, encoding="utf-8", errors="backslashreplace")


def _write_atomic(path: Path, lines: Iterable[str]) -> None:
    """`path` holds `lines` whole, or (an OSError: a full disk) is as it was: written to a temporary file
    beside it, flushed to disk, then renamed over it; the temporary file never outlives a failure."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with _open_lines(tmp, "w") as handle:
            handle.writelines(lines)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _record(meta: dict[str, Any]) -> list[str]:
    return [json.dumps(meta, indent=2) + "\n"]


def _missing_folders(root: Path) -> list[Path]:
    """`root` and its ancestors that do not exist yet, outermost first."""
    missing = []
    for folder in (root, *root.parents):
        if folder.exists():
            break
        missing.append(folder)
    return missing[::-1]


class RunFolder:
    """`DIR/actions.jsonl`, `DIR/episodes.jsonl`, `DIR/run.json`, `DIR/summary.{json,md}`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.actions = self.root / ACTIONS
        self.episodes = self.root / EPISODES
        self.run = self.root / RUN
        self._handles: tuple[IO[str], IO[str]] | None = None

    def start(self, meta: dict[str, Any]) -> None:
        """A fresh run: refuse a folder that already holds results, else start empty files and `run.json`
        (last, atomically). All or nothing: when a write fails (a full disk), whatever this call created,
        folders included, is removed again, so nothing blocks the next start or `--resume`."""
        for path in (self.episodes, self.actions):
            if _is_nonempty(path):
                raise OutputError(
                    f"{path} already holds results; "
                    "pass --resume to continue that run or choose another --out"
                )
        folders = _missing_folders(self.root)
        files = [path for path in (self.episodes, self.actions) if not path.exists()]
        writing = self.root
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            for writing, lines in ((self.episodes, []), (self.actions, []), (self.run, _record(meta))):
                _write_atomic(writing, lines)
        except OSError as exc:
            for path in files:
                path.unlink(missing_ok=True)
            for folder in reversed(folders):
                with contextlib.suppress(OSError):
                    folder.rmdir()
            reason = exc.strerror or str(exc)
            raise OutputError(f"cannot write {writing}: {reason}; nothing was left in --out") from None

    def recorded_meta(self) -> dict[str, Any] | None:
        """What `run.json` records, or None when there is none to hold to. One an older SEAL left empty
        or broken (it could not write it: a full disk at start) is none when the folder holds no episode
        yet; beside episodes it is a one-line OutputError saying how to go on."""
        if not self.run.is_file():
            return None
        try:
            recorded = json.loads(self.run.read_text(encoding="utf-8"))
        except (ValueError, RecursionError):
            recorded = None
        if isinstance(recorded, dict):
            return recorded
        if not (_is_nonempty(self.episodes) or _is_nonempty(self.actions)):
            return None
        raise OutputError(
            f"{self.run} is empty or not a JSON object (a run that could not write it, e.g. on a full disk): "
            f"delete it and rerun with --resume to keep the episodes in {self.root} as this run's, "
            "or choose another --out"
        )

    def resume(self, meta: dict[str, Any], selection: Sequence[str], retry_failed: bool) -> Resumed:
        """Keep every finished episode of the selection with its action log. Broken lines, episodes
        without an action log and, with `retry_failed`, endpoint failures are dropped: they run again."""
        if not self.root.exists():
            self.start(meta)
            return Resumed()
        before = self.recorded_meta()
        if before is None and not (_is_nonempty(self.episodes) or _is_nonempty(self.actions)):
            self.start(meta)
            return Resumed()
        for key in MUST_MATCH:
            if before is not None and key in before and before[key] != meta[key]:
                raise OutputError(
                    f"{self.root} holds a run with {key} {before[key]!r}, not {meta[key]!r}; "
                    "use another --out"
                )
        wanted = set(selection)
        records: dict[str, dict[str, Any]] = {}
        dropped = 0
        for record in _parse_lines(self.episodes):
            if record is None or record["task_id"] in records or (retry_failed and "error" in record):
                dropped += 1
                continue
            records[record["task_id"]] = record
        outside = sorted(set(records) - wanted)
        if outside:
            raise OutputError(
                f"{self.episodes} holds {len(outside)} task(s) outside this selection (e.g. {outside[0]}); "
                "resume with the same --split/--tasks/--limit or choose another --out"
            )
        logs: dict[str, dict[str, Any]] = {}
        for log in _parse_lines(self.actions):
            if log is not None and log["task_id"] in records and log["task_id"] not in logs:
                logs[log["task_id"]] = log
        order = [task_id for task_id in records if task_id in logs]
        dropped += len(records) - len(order)
        records = {task_id: records[task_id] for task_id in order}
        _write_atomic(self.episodes, (_dump(records[t]) for t in order))
        _write_atomic(self.actions, (_dump(logs[t]) for t in order))
        _write_atomic(self.run, _record(meta))
        return Resumed(records, dropped)

    def __enter__(self) -> RunFolder:
        self._handles = (_open_lines(self.actions, "a"), _open_lines(self.episodes, "a"))
        return self

    def __exit__(self, *exc: object) -> None:
        if self._handles is not None:
            for handle in self._handles:
                handle.close()
            self._handles = None

    def append(self, action_log: dict[str, Any], record: dict[str, Any]) -> None:
        """The action log first: a task counts as done once its episode line is on disk."""
        if self._handles is None:
            raise RuntimeError("RunFolder.append outside its `with` block")
        for handle, value in zip(self._handles, (action_log, record), strict=True):
            handle.write(_dump(value))
            handle.flush()

    def put_in_order(self, selection: Sequence[str]) -> None:
        """Rewrite both files in selection order (episodes finish in any order), so runs diff cleanly."""
        rank = {task_id: i for i, task_id in enumerate(selection)}
        for path in (self.actions, self.episodes):
            rows = [row for row in _parse_lines(path) if row is not None]
            rows.sort(key=lambda row: rank.get(row["task_id"], len(rank)))
            _write_atomic(path, (_dump(row) for row in rows))

    def action_logs(self) -> list[dict[str, Any]]:
        return [row for row in _parse_lines(self.actions) if row is not None]

    def write_meta(self, meta: dict[str, Any]) -> None:
        """`run.json` alone: the record of a run whose episodes are in sub-folders (`--samples`)."""
        self.root.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.run, _record(meta))

    def write_summary(self, summary: dict[str, Any], markdown: str) -> None:
        _write_atomic(self.root / SUMMARY_JSON, _record(summary))
        _write_atomic(self.root / SUMMARY_MD, [markdown])
