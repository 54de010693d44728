"""What `seal view` reads: the episodes of every folder the project writes, each with its action log and
what was recorded about it when it ran.

    seal eval --out DIR        DIR/actions.jsonl + DIR/episodes.jsonl (+ run.json)   one source, "eval"
    seal diagnose --out DIR    DIR/actions.jsonl + DIR/episodes.jsonl                one source, "diagnose"
    action logs alone          DIR/actions.jsonl (examples/)                         one source, "actions"
    a training run             DIR/validation/{step}.jsonl, DIR/test/global_step_N/N.jsonl (verl's dumps,
                               each row's `action_log`), DIR/seal_steps.jsonl (Ω and ρ after each step):
                               one source per dump

The folders inside a folder are read too, one level down (examples/ holds action logs and run/).
Everything is read and checked before anything is replayed: a problem is one line naming FILE:LINE.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seal.env.replay import ActionLogError, parse_action_log, read_action_logs
from seal.jsonl import JsonLinesError, json_objects, parse_line
from seal.reports.runs import CHECKPOINT_PREFIX, STEPS_FILE, dump_lines, training_steps
from seal.results.files import ACTIONS, EPISODES, RUN


class ViewInputError(ValueError):
    """A folder `seal view` cannot read; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class SourceEpisode:
    """One episode as a folder holds it: its action log (None when the row has none) and its record."""

    where: str
    """FILE:LINE of the line it came from."""
    task_id: str
    log: dict[str, Any] | None
    recorded: dict[str, Any]
    """What the folder says happened: reward, labels, evidence, cut, llm_calls, taxonomy, error, ...
    (only the fields that folder writes)."""


@dataclass(frozen=True)
class Source:
    """One set of episodes: an eval, a diagnosis, a log file, or one validation or test pass of a run."""

    name: str
    kind: str
    """eval | diagnose | actions | val | test"""
    path: str
    episodes: list[SourceEpisode]
    step: int | None = None
    """The training step of a run's dump."""
    training: dict[str, Any] | None = None
    """The run's `seal_steps.jsonl` record in effect at `step` (Ω and ρ after that training step)."""


def read_sources(folders: list[Path]) -> list[Source]:
    """Every source in `folders`, in the order given; `ViewInputError` if one holds no episode."""
    sources: list[Source] = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise ViewInputError(
                f"{folder}: no such folder" if not folder.exists() else f"{folder} is a file, not a folder"
            )
        name = folder.name or folder.resolve().name
        found = _sources_in(folder, name)
        for inside in sorted(path for path in folder.iterdir() if path.is_dir()):
            found += _sources_in(inside, f"{name}/{inside.name}")
        if not found:
            raise ViewInputError(
                f"{folder} holds no episodes: no {ACTIONS}, validation/{{step}}.jsonl or "
                f"test/{CHECKPOINT_PREFIX}N/N.jsonl in it or in a folder inside it"
            )
        sources += found
    return sources


def _sources_in(folder: Path, name: str) -> list[Source]:
    try:
        found = _logged(folder, name) + _run(folder, name)
    except (JsonLinesError, ActionLogError) as exc:
        raise ViewInputError(str(exc)) from None
    for source in found:
        if not source.episodes:
            raise ViewInputError(f"{source.path}: no episodes in the file")
    return found


def _logged(folder: Path, name: str) -> list[Source]:
    """`seal eval`'s, `seal diagnose`'s or a bare action-log folder: logs paired with their records."""
    actions, episodes = folder / ACTIONS, folder / EPISODES
    if not actions.is_file():
        if episodes.is_file():
            raise ViewInputError(
                f"{episodes} has no action logs beside it ({ACTIONS}): the conversations cannot be rebuilt "
                "(seal eval and seal diagnose write them)"
            )
        return []
    logs = read_action_logs(actions)
    if not episodes.is_file():
        return [Source(name, "actions", str(actions), [_bare(actions, i, log) for i, log in enumerate(logs)])]
    records = list(json_objects(episodes))
    if len(records) != len(logs):
        raise ViewInputError(
            f"{episodes} holds {len(records)} episode(s) but {actions} {len(logs)} action log(s)"
        )
    paired = []
    for (where, record), log in zip(records, logs, strict=True):
        if record.get("task_id") != log["task_id"]:
            raise ViewInputError(
                f"{where}: the episode of {str(record.get('task_id'))[:80]!r} is paired with the action log "
                f"of {log['task_id']!r} (the two files must list the same episodes in the same order)"
            )
        paired.append(SourceEpisode(where, log["task_id"], log, checked_record(record, where)))
    kind = "eval" if (folder / RUN).is_file() else "diagnose"
    return [Source(name, kind, str(folder), paired)]


def _bare(path: Path, index: int, log: dict[str, Any]) -> SourceEpisode:
    return SourceEpisode(f"{path}, log {index + 1}", log["task_id"], log, {})


def _run(folder: Path, name: str) -> list[Source]:
    """A training run's validation dumps by step, then its test passes."""
    dumps = [(int(p.stem), "val", p) for p in (folder / "validation").glob("*.jsonl") if p.stem.isdigit()]
    for checkpoint in (folder / "test").glob(f"{CHECKPOINT_PREFIX}*"):
        step = checkpoint.name.removeprefix(CHECKPOINT_PREFIX)
        if step.isdigit() and (checkpoint / f"{step}.jsonl").is_file():
            dumps.append((int(step), "test", checkpoint / f"{step}.jsonl"))
    if not dumps:
        return []
    steps = training_steps(folder / STEPS_FILE)
    sources = []
    for step, kind, path in sorted(dumps, key=lambda d: (d[1] == "test", d[0])):
        in_effect = [s for s in steps if s <= step]
        sources.append(
            Source(
                f"{name} {kind} step {step}",
                kind,
                str(path),
                [_dump_episode(where, row) for where, row in dump_lines(path)],
                step=step,
                training=steps[max(in_effect)] if in_effect else None,
            )
        )
    return sources


def _dump_episode(where: str, row: dict[str, Any]) -> SourceEpisode:
    """A dump row (seal/trainer/rl/trajectory.py's fields): `labels` and `action_log` are JSON text."""
    task_id = row.get("task_id") or row.get("gts")
    recorded = {key: row[key] for key in RECORDED_DUMP_FIELDS if key in row}
    recorded["reward"] = row["score"]
    if isinstance(row.get("labels"), str):
        recorded["labels"] = _json_field(row["labels"], where, "labels")
    recorded = checked_record(recorded, where)
    log = None
    if isinstance(row.get("action_log"), str):
        log = parse_action_log(_json_field(row["action_log"], where, "action_log"), f"{where}: action_log")
    return SourceEpisode(where, task_id, log, recorded)


RECORD_TYPES: dict[str, type | tuple[type, ...]] = {
    "reward": (int, float),
    "labels": list,
    "evidence": list,
    "cut": str,
    "llm_calls": int,
    "truncated": bool,
    "taxonomy": str,
    "interface_version": int,
    "mode": str,
    "category": str,
    "split": str,
    "error": str,
    "env_error": str,
    "missing": bool,
}
"""The JSON type of each recorded field the page shows (any other field is kept as it is)."""


def checked_record(record: dict[str, Any], where: str) -> dict[str, Any]:
    """The record without its null fields (a dump's `missing` rows have them), each shown field of its JSON
    type and the labels strings; anything else is a `JsonLinesError` naming FILE:LINE and the field."""
    kept = {key: value for key, value in record.items() if value is not None}
    for key, kind in RECORD_TYPES.items():
        value = kept.get(key)
        if value is None:
            continue
        wrong_bool = isinstance(value, bool) and kind is not bool
        not_finite = key == "reward" and isinstance(value, float) and not math.isfinite(value)
        if wrong_bool or not_finite or not isinstance(value, kind):
            raise JsonLinesError(f"{where}: '{key}' is {json.dumps(value)[:40]}, not what the field holds")
    if not all(isinstance(label, str) for label in kept.get("labels", [])):
        raise JsonLinesError(f"{where}: 'labels' must be a list of label names")
    return kept


RECORDED_DUMP_FIELDS = (
    "labels",
    "taxonomy",
    "cut",
    "llm_calls",
    "truncated",
    "interface_version",
    "mode",
    "split",
    "env_error",
    "missing",
)
"""What a dump row says about its episode, kept for the page (the rest is verl's prompt and response)."""


def _json_field(text: str, where: str, key: str) -> Any:
    try:
        return parse_line(text, f"{where}: '{key}'")
    except JsonLinesError:
        raise JsonLinesError(f"{where}: '{key}' is not JSON text") from None
