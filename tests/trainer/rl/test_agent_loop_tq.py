"""The production path: V1's `AgentLoopWorkerTQ` (a Ray actor) runs SealAgentLoop and writes the
trajectories into TransferQueue (local Ray on CPU, one storage unit); they must land there exactly as
the legacy worker returns them."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import ray
import transfer_queue as tq
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
from verl.utils import tensordict_utils as tu
from verl.utils.dataset.rl_dataset import collate_fn

from seal.env.connect import close_shared_clients
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.sft.scripted_server import ScriptedLLMServer
from tests.support.rollout_helpers import (
    MODES_BY_AGENT,
    TASKS,
    model_folder,
    row,
    trainer_config,
)
from tests.support.service_thread import service_in_thread

TIMINGS = ("env_seconds", "gen_seconds")
FIELDS = ["extra_fields", "prompts", "responses", "response_mask", "rm_scores", "rollout_log_probs"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"))


def comparable(extra: dict[str, Any]) -> dict[str, Any]:
    """The sample's fields without the timings (which differ from run to run)."""
    fields = TrajectoryFields.from_extra_fields(extra)
    kept = {key: value for key, value in fields.extra_fields().items() if key not in TIMINGS}
    return {**kept, "reward_extra_info": dict(kept["reward_extra_info"])}


async def legacy_run(config: Any, server: ScriptedLLMServer, rows: list[dict]) -> DataProto:
    worker = AgentLoopWorker(config, llm_client=server)
    batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
    await close_shared_clients()
    return batch


def wait_finished(uids: list[str], timeout_s: float = 120.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        listing = tq.kv_list("train").get("train", {})
        statuses = [listing.get(uid, {}).get("status") for uid in uids]
        if all(status in ("finished", "failure") for status in statuses) or time.monotonic() > deadline:
            return statuses
        time.sleep(0.1)


def test_the_batch_lands_in_transfer_queue_as_the_legacy_worker_returns_it(transfer_queue, folder):
    tokenizer = AutoTokenizer.from_pretrained(folder)
    plans, rows = {}, []
    for agent, mode in MODES_BY_AGENT.items():
        for task_id in TASKS:
            plans[(task_id, mode)] = ground_truth_actions(task_id)
            rows.append(row(task_id, agent, len(rows)))
    server = ScriptedLLMServer(tokenizer, plans)
    with service_in_thread() as url:
        config = trainer_config(folder, env_url=url, overrides=["actor_rollout_ref.rollout.n=1"])
        legacy = asyncio.run(legacy_run(config, server, rows))
        uids = [uuid.uuid4().hex for _ in rows]
        batch = tu.get_tensordict({**{key: [r[key] for r in rows] for key in rows[0]}, "uid": uids})
        tu.assign_non_tensor_data(batch, "global_steps", 1)
        tags = [{"is_prompt": True, "status": "pending", "global_steps": 1} for _ in uids]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
        worker = AgentLoopWorkerTQ.remote(config, llm_client=server)
        ray.get(worker.generate_sequences.remote(batch))
        assert wait_finished(uids) == ["finished"] * len(rows)
    listing = tq.kv_list("train")["train"]
    for uid in uids:  # V1's step metrics take int() of every sample's policy versions
        tag = listing[f"{uid}_0_0"]
        assert (tag["min_global_steps"], tag["max_global_steps"]) == (1, 1)
    stored = tq.kv_batch_get(keys=[f"{uid}_0_0" for uid in uids], partition_id="train", select_fields=FIELDS)
    width = legacy.batch["prompts"].shape[1]
    for i in range(len(rows)):
        attention = legacy.batch["attention_mask"][i]
        kept = int(attention[width:].sum())
        extra = {key: legacy.non_tensor_batch[key][i] for key in TrajectoryFields.__dataclass_fields__}
        assert comparable(stored["extra_fields"][i]) == comparable(extra)
        assert stored["extra_fields"][i]["reward"] == 1.0
        assert stored["rm_scores"][i].sum().item() == legacy.batch["rm_scores"][i].sum().item() == 1.0
        assert stored["prompts"][i].tolist() == legacy.batch["prompts"][i][attention[:width].bool()].tolist()
        assert stored["responses"][i].tolist() == legacy.batch["responses"][i][:kept].tolist()
        assert stored["response_mask"][i].tolist() == legacy.batch["response_mask"][i][:kept].tolist()
        assert stored["rollout_log_probs"][i].tolist() == legacy.batch["rollout_log_probs"][i][:kept].tolist()
