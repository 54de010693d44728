"""Large `seal view` inputs built quickly through the writers the project uses: a `seal eval` folder of the
300 test tasks (`RunFolder`, `episode_record`, `summarize`) and a run folder of validation dumps of the
100 val tasks at several steps (`TrajectoryFields.reward_extra_info`, verl's dump row). Each episode is a
replayed action log: the ground truth, or a wrong play (stops after the first turn, or repeats its first
call until the call limit cuts it: a loop)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from seal.bfcl.tasks import category_of, split_ids
from seal.env.replay import replay_steps
from seal.evaluation.store import RunFolder
from seal.protocol import DEFAULT_PROTOCOL
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions
from seal.reports.tables import episode_record, markdown_table, summarize
from seal.trainer.rl.trajectory import TrajectoryFields

PLAYS = ("ground truth", "stops after the first turn", "loops on its first call")
LOOP = 6


@cache
def play(task_id: str, kind: str) -> tuple[tuple[str, ...], str]:
    """(the actions, the cut that ended them)."""
    truth = ground_truth_actions(task_id, DEFAULT_PROTOCOL)
    if kind == PLAYS[0]:
        return tuple(truth), "none"
    if kind == PLAYS[1]:
        first = truth[: truth.index(END_OF_TURN) + 1]
        return tuple(first + [END_OF_TURN] * 8), "none"
    call = next((a for a in truth if a != END_OF_TURN), END_OF_TURN)
    return (call,) * LOOP, "calls"


@cache
def played(task_id: str, kind: str):
    actions, cut = play(task_id, kind)
    log = {"task_id": task_id, "protocol": DEFAULT_PROTOCOL, "actions": list(actions)}
    return log, cut, replay_steps(log, cut=cut).result


def eval_folder(out: Path, count: int = 300) -> Path:
    """A `seal eval` output of the first `count` test tasks, one play in three wrong."""
    folder = RunFolder(out)
    tasks = split_ids("test")[:count]
    folder.start(
        {"model": "synthetic", "protocol": DEFAULT_PROTOCOL, "taxonomy": "reference", "split": "test"}
    )
    records = []
    with folder:
        for index, task_id in enumerate(tasks):
            log, cut, result = played(task_id, PLAYS[index % 3])
            record = {**episode_record(result), "cut": cut, "llm_calls": len(log["actions"])}
            folder.append(log, record)
            records.append(record)
    summary = summarize(records, "test")
    folder.write_summary(summary, markdown_table(summary))
    return out


def run_folder(out: Path, steps: int = 10) -> Path:
    """A run folder with the val dumps of `steps` validation passes; the policy gets better step by step."""
    tasks = split_ids("val")
    for step in range(steps):
        rows = []
        for index, task_id in enumerate(tasks):
            kind = PLAYS[0] if (index + step) % steps < step + 1 else PLAYS[1 + index % 2]
            log, cut, result = played(task_id, kind)
            fields = TrajectoryFields(
                task_id=task_id,
                category=category_of(task_id),
                mode="eval",
                labels=result.labels,
                taxonomy=result.taxonomy,
                interface_version=0,
                reward=result.reward,
                llm_calls=len(log["actions"]),
                truncated=result.truncated,
                env_error="",
                env_seconds=0.0,
                gen_seconds=0.0,
                actions=log["actions"],
                protocol=DEFAULT_PROTOCOL,
                cut=cut,
                split="val",
            )
            rows.append({"gts": task_id, "score": result.reward, "step": step, **fields.reward_extra_info()})
        dump = out / "validation" / f"{step}.jsonl"
        dump.parent.mkdir(parents=True, exist_ok=True)
        dump.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return out
