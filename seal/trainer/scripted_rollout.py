"""Scripted episodes through the real `SealAgentLoop`, on CPU: no model, no GPU, no Ray.

verl's `AgentLoopWorker` builds the loop for each row exactly as a training run does (the same config,
tokenizer, context builder and episode limits); a `ScriptedLLMServer` answers every call with the next
reply of the row's script (for example the ground truth), and the environment runs in-process. What
comes back is what training would have trained on: the tokens, the response mask and the trajectory's
fields. `scripts/episode_budget.py` uses it to measure what the limits leave passable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig, open_dict
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto

from seal.dataset import EVAL_AGENT, TRAIN_AGENT
from seal.env.episode import Episode
from seal.trainer.agent_loop import close_env_clients
from seal.trainer.scripted_server import Reply, ScriptedLLMServer
from seal.trainer.trajectory import TRAJECTORY_KEYS, TrajectoryFields

AGENTS = {"train": TRAIN_AGENT, "eval": EVAL_AGENT}


@dataclass(frozen=True)
class ScriptedTrajectory:
    """One row's result, unpadded: the tokens training sees and the episode's facts."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    fields: TrajectoryFields


def in_process(config: DictConfig) -> DictConfig:
    """A copy of `config` whose rollouts use an in-process environment (no service to start)."""
    config = config.copy()
    with open_dict(config):
        config.seal.rollout.env_backend = "inprocess"
        config.seal.rollout.trace_dir = None
    return config


def loop_row(task_id: str, mode: str, index: int) -> dict[str, Any]:
    """The row verl hands the agent loop for `task_id` (seal/dataset.py's layout)."""
    episode = Episode(task_id, mode="eval")
    return {
        "raw_prompt": episode.reset(),
        "agent_name": AGENTS[mode],
        "extra_info": {"task_id": task_id, "category": episode.task.category, "index": index},
        "index": index,
        "data_source": episode.task.category,
    }


def non_tensor_columns(rows: Sequence[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Rows as the object columns of a `DataProto`'s non-tensor batch (what the agent loops read)."""
    columns = {}
    for key in rows[0]:
        column = np.empty(len(rows), dtype=object)
        column[:] = [row[key] for row in rows]
        columns[key] = column
    return columns


def _unpadded(batch: DataProto) -> Iterator[ScriptedTrajectory]:
    width = batch.batch["prompts"].shape[1]
    for i in range(len(batch)):
        attention = batch.batch["attention_mask"][i]
        kept = int(attention[width:].sum())
        extra = {key: batch.non_tensor_batch[key][i] for key in TRAJECTORY_KEYS}
        yield ScriptedTrajectory(
            prompt_ids=batch.batch["prompts"][i][attention[:width].bool()].tolist(),
            response_ids=batch.batch["responses"][i][:kept].tolist(),
            response_mask=batch.batch["response_mask"][i][:kept].tolist(),
            fields=TrajectoryFields.from_extra_fields(extra),
        )


async def _play(
    config: DictConfig,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    scripts: Mapping[tuple[str, str], list[Reply]],
) -> list[ScriptedTrajectory]:
    server = ScriptedLLMServer(tokenizer, dict(scripts))
    worker = AgentLoopWorker(config, llm_client=server)
    batch = await worker.generate_sequences(DataProto.from_dict(non_tensors=non_tensor_columns(rows)))
    await close_env_clients()
    return list(_unpadded(batch))


def play_scripts(
    config: DictConfig,
    tokenizer: Any,
    scripts: Mapping[tuple[str, str], list[Reply]],
    chunk: int = 64,
    progress: Any = None,
) -> list[ScriptedTrajectory]:
    """Play each `(task_id, mode)` script once, in order, `chunk` rows per batch; `progress(n)` after each."""
    config = in_process(config)
    keys = list(scripts)
    played: list[ScriptedTrajectory] = []
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        rows = [loop_row(task_id, mode, start + i) for i, (task_id, mode) in enumerate(part)]
        played += asyncio.run(_play(config, tokenizer, rows, {key: scripts[key] for key in part}))
        if progress is not None:
            progress(len(part))
    return played
