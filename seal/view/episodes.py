"""Each episode of a source rebuilt turn by turn for the page: its action log replayed through the
environment (`seal.env.replay.replay_steps`; episodes are deterministic), checked against what the folder
recorded when it ran, with the diagnosis of every ground-truth turn and the Ω in effect.

The page gets two parts: `rows` (one small line per episode, for the table and its filters) and
`details` (the conversations, read when an episode is opened). Texts are stored once in `texts` (a task's
system prompt and its tool results recur across a run's validation passes) and referred to by index.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from seal.bfcl.tasks import category_of
from seal.env.action_limit import kept_action
from seal.env.context_limits import CUTS
from seal.env.replay import Replayed, replay_steps
from seal.results.endings import ends_in_loop
from seal.results.pass_rate import passed
from seal.results.tables import SHORT_NAMES
from seal.tocf.apatch import APatchConfig, static_weight
from seal.tocf.labels import DEFAULT_TAXONOMY, TAXONOMIES
from seal.view.sources import Source, SourceEpisode

MODE_NOTES = {
    "eval": "eval mode: the raw interface, byte-identical to the base prompt (Ω is shown to training "
    "episodes only)",
    "train": "train mode: it ran under Ω (see the training Ω), while this page replays it under the raw "
    "interface, so its system prompt and error hints are the raw ones",
}


class Texts:
    """Every text of the page stored once; an index refers to it."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        if text not in self._index:
            self._index[text] = len(self.items)
            self.items.append(text)
        return self._index[text]


@dataclass
class PageData:
    """What the page embeds: the sources, a table row and a detail per episode, and the shared texts."""

    sources: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    details: list[dict[str, Any]] = field(default_factory=list)
    texts: Texts = field(default_factory=Texts)

    @property
    def disagreements(self) -> int:
        return sum(bool(row["diff"]) for row in self.rows)


def build(sources: list[Source]) -> PageData:
    """Replay every episode of `sources` (an action log met twice is replayed once)."""
    data = PageData()
    replays: dict[str, Replayed | str] = {}
    total = sum(len(source.episodes) for source in sources)
    with tqdm(total=total, desc="replaying", unit="episode", disable=None) as bar:
        for index, source in enumerate(sources):
            data.sources.append(
                {
                    "name": source.name,
                    "kind": source.kind,
                    "path": source.path,
                    "step": source.step,
                    "n": len(source.episodes),
                }
            )
            for episode in source.episodes:
                row, detail = _episode(index, source, episode, data.texts, replays)
                data.rows.append(row)
                data.details.append(detail)
                bar.update()
    return data


def _episode(
    index: int, source: Source, episode: SourceEpisode, texts: Texts, replays: dict[str, Replayed | str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    recorded = episode.recorded
    category = recorded.get("category") or category_of(episode.task_id)
    actions = episode.log["actions"] if episode.log is not None else []
    looped = ends_in_loop(actions, episode.log["protocol"]) if episode.log else bool(recorded.get("looped"))
    row = {
        "src": index,
        "task": episode.task_id,
        "cat": SHORT_NAMES.get(category, category),
        "step": source.step,
        "calls": recorded.get("llm_calls", len(actions)),
        "cut": recorded.get("cut") or ("truncated" if recorded.get("truncated") else "none"),
        "loop": looped,
        "error": recorded.get("error") or recorded.get("env_error") or "",
    }
    detail: dict[str, Any] = {
        "where": episode.where,
        "recorded": {key: value for key, value in recorded.items() if key != "evidence"},
    }
    if episode.log is None:
        return _not_rebuilt(row, detail, recorded, "this row holds no action log")
    replayed = _replayed(episode, episode.log, replays)
    if isinstance(replayed, str):
        row["error"] = row["error"] or "cannot be replayed"
        return _not_rebuilt(row, detail, recorded, f"this episode cannot be replayed ({replayed})")
    result = replayed.result
    diff = _disagreements(recorded, replayed)
    labels = recorded.get("labels") or result.labels
    row.update(reward=recorded.get("reward", result.reward), labels=labels, diff=len(diff))
    row["pass"] = passed(row["reward"])
    detail.update(
        system=texts.add(replayed.opening[0]["content"]),
        turns=_turns(replayed, actions, texts),
        unplayed=replayed.unplayed,
        verdict=result.verifier,
        replayed={"reward": result.reward, "labels": result.labels, "truncated": result.truncated},
        disagreements=diff,
        omega=_omega(source, recorded, result.interface_version, labels),
    )
    return row, detail


def _not_rebuilt(
    row: dict[str, Any], detail: dict[str, Any], recorded: dict[str, Any], why: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The row and detail of an episode shown as recorded, with `why` its conversation is not."""
    detail["missing"] = f"{why}: the conversation cannot be rebuilt"
    row.update(reward=recorded.get("reward", 0.0), labels=recorded.get("labels") or [], diff=0)
    row["pass"] = passed(row["reward"])
    return row, detail


def _replayed(
    episode: SourceEpisode, log: dict[str, Any], replays: dict[str, Replayed | str]
) -> Replayed | str:
    """The episode played again, or why it cannot be (one such episode is marked, not the folder refused)."""
    recorded = episode.recorded
    taxonomy = recorded.get("taxonomy") if recorded.get("taxonomy") in TAXONOMIES else DEFAULT_TAXONOMY
    cut = recorded.get("cut") if recorded.get("cut") in CUTS else None
    key = json.dumps([log["task_id"], log["protocol"], taxonomy, cut, log["actions"]])
    if key not in replays:
        try:
            replays[key] = replay_steps(log, taxonomy=taxonomy, cut=cut)
        except Exception as exc:  # an environment failure on one episode must not refuse the folder
            replays[key] = " ".join(str(exc).split()) or type(exc).__name__
    return replays[key]


def _turns(replayed: Replayed, actions: list[str], texts: Texts) -> list[dict[str, Any]]:
    """Per ground-truth turn: the user message(s), each model reply with what the environment made of it,
    and the turn's label with its evidence."""
    evidence = replayed.result.evidence
    turns: list[dict[str, Any]] = [{"user": [], "steps": []} for _ in evidence]
    turns[0]["user"] = [_message(m, texts) for m in replayed.opening[1:]]
    for action, step in zip(actions, replayed.steps, strict=False):
        info = step.info
        entry = {
            "reply": texts.add(kept_action(action)),
            "accepted": info["accepted"],
            "rejected": info["rejected"],
            "errors": info["errors"],
            "served": [],
            "ended": info["turn_ended"],
        }
        turns[info["turn"]]["steps"].append(entry)
        served = [_message(m, texts) for m in step.observation]
        if not info["turn_ended"]:
            entry["served"] = served
        elif info["turn"] + 1 < len(turns):
            turns[info["turn"] + 1]["user"] = served
    for turn, found in zip(turns, evidence, strict=True):
        turn.update(label=found["label"], evidence=found)
    return turns


def _message(message: dict[str, str], texts: Texts) -> dict[str, Any]:
    return {"role": message["role"], "text": texts.add(message["content"])}


def _disagreements(recorded: dict[str, Any], replayed: Replayed) -> list[str]:
    """Where the replay differs from the record: said on the page, never hidden."""
    result = replayed.result
    found = []
    if "reward" in recorded and recorded["reward"] != result.reward:
        found.append(f"reward: recorded {recorded['reward']}, replayed {result.reward}")
    if isinstance(recorded.get("labels"), list) and recorded["labels"] != result.labels:
        found.append(f"labels: recorded {', '.join(recorded['labels'])}; replayed {', '.join(result.labels)}")
    if isinstance(recorded.get("evidence"), list) and recorded["evidence"] != result.evidence:
        turns = [
            str(i)
            for i, (a, b) in enumerate(zip(recorded["evidence"], result.evidence, strict=False))
            if a != b
        ]
        found.append(f"evidence differs in turn(s) {', '.join(turns) or 'count'}")
    return found


def _omega(source: Source, recorded: dict[str, Any], version: int, labels: list[str]) -> dict[str, Any]:
    """The interface the episode ran under and, for a run's dump, the training Ω and ρ at its step."""
    mode = recorded.get("mode", "eval")
    omega: dict[str, Any] = {
        "version": recorded.get("interface_version", version),
        "mode": mode,
        "note": MODE_NOTES.get(mode, MODE_NOTES["eval"]),
    }
    record = source.training
    if record is None:
        return omega
    interface = record.get("interface") if isinstance(record.get("interface"), dict) else {}
    omega["training"] = {
        "step": record["step"],
        "version": interface.get("version", record.get("version")),
        "guidelines": interface.get("guidelines", []),
        "system_suffix": interface.get("system_suffix", ""),
    }
    rho = record.get("apatch", {}).get("rho") if isinstance(record.get("apatch"), dict) else None
    if isinstance(rho, dict):
        defaults = APatchConfig()
        omega["apatch"] = {
            "weight": static_weight(labels, rho, defaults.w_min, defaults.w_max),
            "step": record["step"],
            "clip": [defaults.w_min, defaults.w_max],
        }
    return omega
