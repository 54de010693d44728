"""Action logs: read and validate them, and replay them through an episode.

An action log `{"task_id", "protocol", "actions": [assistant text, ...]}` replays an episode exactly,
because the environment is deterministic. Logs written before the key was renamed name the protocol
`format`; they are read as before and normalised to `protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import UnknownTaskError, get_task
from seal.env.context_limits import CUTS
from seal.env.episode import NOT_KEPT_PATTERN, Episode, EpisodeLimits, EpisodeResult, StepResult
from seal.env.store import MAX_TASK_ID_CHARS
from seal.jsonl import JsonLinesError, json_lines
from seal.protocol import DEFAULT_PROTOCOL, PROTOCOLS
from seal.tocf.labels import DEFAULT_TAXONOMY


class ActionLogError(ValueError):
    """An action log that cannot be replayed; the message names the line and the problem."""


def parse_action_log(log: Any, where: str = "action log") -> dict[str, Any]:
    """Validate one decoded line; raises ActionLogError with a one-line reason starting with `where`."""
    if not isinstance(log, dict):
        raise ActionLogError(f"{where}: expected a JSON object")
    if "format" in log and "protocol" not in log:
        log["protocol"] = log.pop("format")
    task_id, protocol, actions = log.get("task_id"), log.get("protocol", DEFAULT_PROTOCOL), log.get("actions")
    if not isinstance(task_id, str):
        raise ActionLogError(f"{where}: 'task_id' must be a string")
    if len(task_id) > MAX_TASK_ID_CHARS:
        raise ActionLogError(f"{where}: 'task_id' is {len(task_id):,} characters long, not a task id")
    try:
        get_task(task_id)
    except UnknownTaskError as exc:
        raise ActionLogError(f"{where}: {exc}") from None
    if not isinstance(protocol, str) or protocol not in PROTOCOLS:
        shown = repr(protocol)[:80] if isinstance(protocol, str) else f"a JSON {type(protocol).__name__}"
        raise ActionLogError(f"{where}: 'protocol' must be one of {', '.join(PROTOCOLS)}, not {shown}")
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise ActionLogError(f"{where}: 'actions' must be a list of strings")
    return {**log, "task_id": task_id, "protocol": protocol, "actions": actions}


def read_action_logs(path: Path) -> list[dict[str, Any]]:
    """Every log of a JSONL file, validated before anything runs."""
    path = Path(path)
    if path.is_dir():
        inside = path / "actions.jsonl"
        hint = f"; did you mean {inside} (what seal eval writes)?" if inside.is_file() else ""
        raise ActionLogError(f"{path} is a folder, not a JSONL file of action logs{hint}")
    try:
        logs = [parse_action_log(log, where) for where, log in json_lines(path)]
    except JsonLinesError as exc:
        raise ActionLogError(str(exc)) from None
    if not logs:
        raise ActionLogError(f"{path}: no action logs in the file")
    return logs


@dataclass(frozen=True)
class Replayed:
    """An action log played again, message by message: what the environment served and what it scored."""

    opening: list[dict[str, str]]
    """The system prompt (the interface text in effect) and the first user message(s)."""
    steps: list[StepResult]
    """One per played action, in order: what the environment answered and what it accepted or rejected."""
    result: EpisodeResult
    unplayed: int
    """Logged actions after the episode had ended (never played)."""


def replay_steps(
    log: dict[str, Any],
    taxonomy: str = DEFAULT_TAXONOMY,
    priority: tuple[str, ...] | None = None,
    limits: EpisodeLimits | None = None,
    cut: str | None = None,
) -> Replayed:
    """Play the logged actions in an eval-mode episode and finish it. A `cut` (one of `CUTS`: the limit of
    the player's context that ended the episode, as `seal eval` records it) truncates an unfinished episode
    before it is scored, as the store does; `"none"` is no cut. An action kept only as its digest
    (`NOT_KEPT`) is an `ActionLogError`: the episode it came from cannot be played again."""
    if cut is not None and cut not in CUTS:
        raise ValueError(f"cut must be one of {', '.join(CUTS)}, not {cut!r:.40}")
    for number, action in enumerate(log["actions"], 1):
        if NOT_KEPT_PATTERN.fullmatch(action):
            raise ActionLogError(f"action {number} was kept only as its length and digest")
    episode = Episode(
        log["task_id"],
        mode="eval",
        protocol=log["protocol"],
        taxonomy=taxonomy,
        priority=priority,
        limits=limits,
    )
    opening = episode.reset()
    steps = []
    for action in log["actions"]:
        if episode.done:
            break
        steps.append(episode.step(action))
    if cut not in (None, CUTS[0]) and not episode.done:
        episode.truncate(cut)
    return Replayed(opening, steps, episode.finish(), len(log["actions"]) - len(steps))


def replay(
    log: dict[str, Any],
    taxonomy: str = DEFAULT_TAXONOMY,
    priority: tuple[str, ...] | None = None,
    limits: EpisodeLimits | None = None,
) -> EpisodeResult:
    """Play the logged actions in an eval-mode episode and finish it; actions after the end are ignored."""
    return replay_steps(log, taxonomy, priority, limits).result
