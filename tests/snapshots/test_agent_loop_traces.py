"""The agent loop's token ids, response masks and cuts on scripted traces are what they were: every way a
trajectory ends (done, calls, context, opening too long, generation, the trained cut) and the clip of the
environment's messages, through verl's `AgentLoopWorker` on an in-process store."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.dataset import EVAL_AGENT, TRAIN_AGENT
from seal.env.connect import close_shared_clients
from seal.protocol import get_protocol
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions
from seal.trainer.rl.trajectory import TRAJECTORY_KEYS, TrajectoryFields
from seal.trainer.sft.scripted_server import Ramble, ScriptedLLMServer
from tests.snapshots.snapshot import check, digest
from tests.support.rollout_helpers import MODES_BY_AGENT, TASKS, model_folder, row, trainer_config

BASE = "multi_turn_base_0"


def forever() -> str:
    first = next(call for turn in ground_truth_calls(get_task(BASE)) for call in turn)
    return get_protocol("qwen_fc").format_calls([ToolCall(first.name, first.arguments)])


def traces(batch: DataProto) -> list[dict[str, Any]]:
    width = batch.batch["prompts"].shape[1]
    out = []
    for i in range(len(batch)):
        attention = batch.batch["attention_mask"][i]
        kept = int(attention[width:].sum())
        tokens = {
            "prompt": batch.batch["prompts"][i][attention[:width].bool()].tolist(),
            "response": batch.batch["responses"][i][:kept].tolist(),
            "mask": batch.batch["response_mask"][i][:kept].tolist(),
        }
        got = TrajectoryFields.from_extra_fields({k: batch.non_tensor_batch[k][i] for k in TRAJECTORY_KEYS})
        out.append(
            {
                "task_id": got.task_id,
                "mode": got.mode,
                "tokens": {name: digest(ids) for name, ids in tokens.items()},
                "lengths": {name: len(ids) for name, ids in tokens.items()},
                "trained": sum(tokens["mask"]),
                "cut": got.cut,
                "truncated": got.truncated,
                "llm_calls": got.llm_calls,
                "reward": got.reward,
                "labels": got.labels,
                "response_tokens": got.response_tokens,
                "trained_tokens": got.trained_tokens,
                "trained_cut": got.trained_cut,
                "actions": digest(got.actions),
            }
        )
    return out


async def play(folder: Path, plans: dict, rows: list[dict], **config: Any) -> DataProto:
    server = ScriptedLLMServer(AutoTokenizer.from_pretrained(folder), plans)
    worker = AgentLoopWorker(trainer_config(folder, env_backend="inprocess", **config), llm_client=server)
    batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
    await close_shared_clients()
    return batch


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"))


def test_ground_truth_and_silent_traces(folder: Path):
    plans, rows = {}, []
    for agent, mode in MODES_BY_AGENT.items():
        for task_id in TASKS:
            plans[(task_id, mode)] = ground_truth_actions(task_id)
            rows.append(row(task_id, agent, len(rows)))
    plans[("multi_turn_miss_func_1", "train")] = [END_OF_TURN]
    check("agent_loop/ground_truth", traces(asyncio.run(play(folder, plans, rows))))


def test_calls_generation_and_per_call_cuts(folder: Path):
    plans = {(BASE, "train"): [forever()], (BASE, "eval"): [Ramble("and so on ")]}
    rows = [row(BASE, TRAIN_AGENT, 0), row(BASE, EVAL_AGENT, 1)]
    batch = asyncio.run(play(folder, plans, rows, response_length=512, max_llm_calls=6))
    per_call = asyncio.run(
        play(folder, {(BASE, "eval"): [Ramble("more ")]}, [row(BASE, EVAL_AGENT, 0)], max_tokens_per_call=100)
    )
    check("agent_loop/calls_generation", traces(batch) + traces(per_call))


def test_context_cuts_and_the_trained_cut(folder: Path):
    actions = ground_truth_actions(BASE)
    plans = {(BASE, "eval"): actions, (BASE, "train"): actions}
    tokenizer = AutoTokenizer.from_pretrained(folder)
    text = tokenizer.apply_chat_template(
        row(BASE, EVAL_AGENT, 0)["raw_prompt"], add_generation_prompt=True, tokenize=False
    )
    opening = len(tokenizer.encode(text, add_special_tokens=False))
    first_reply = len(tokenizer.encode(actions[0])) + 1
    window = [f"actor_rollout_ref.rollout.max_model_len={opening + 1024 + first_reply + 1}"]
    context = asyncio.run(
        play(folder, plans, [row(BASE, EVAL_AGENT, 0)], response_length=1024, overrides=window)
    )
    unplayed = asyncio.run(
        play(folder, plans, [row(BASE, TRAIN_AGENT, 0)], overrides=["data.max_prompt_length=256"])
    )
    trained = asyncio.run(
        play(folder, plans, [row(BASE, TRAIN_AGENT, 0)], response_length=64, max_tokens_per_call=1024)
    )
    check("agent_loop/context", traces(context) + traces(unplayed) + traces(trained))


def test_environment_messages_are_clipped_alike(folder: Path):
    long_context = "multi_turn_long_context_3"
    plans = {(task, "eval"): ground_truth_actions(task) for task in (BASE, long_context)}
    rows = [row(BASE, EVAL_AGENT, 0), row(long_context, EVAL_AGENT, 1)]
    check("agent_loop/clip", traces(asyncio.run(play(folder, plans, rows, max_env_tokens=64))))
