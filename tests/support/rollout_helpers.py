"""Shared pieces of the agent-loop tests: a tiny ChatML model folder, a composed verl config with a
`seal.rollout` node, dataset-like rows, and the conversation the environment holds for a script (to
check the token stream against)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import verl
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf, open_dict
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn

from seal.bfcl.tasks import get_task
from seal.dataset import EVAL_AGENT, TRAIN_AGENT
from seal.env.client import InProcessEnvClient, open_episode
from seal.env.connect import close_shared_clients
from seal.env.episode import Episode
from seal.protocol import DEFAULT_PROTOCOL
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.rl.agent_loop import agent_loop_config_path
from seal.trainer.rollout_settings import RolloutSettings
from seal.trainer.sft.scripted_server import ScriptedLLMServer
from tests.support.doubles import build_chatml_model_folder

TASKS = (
    "multi_turn_base_0",
    "multi_turn_miss_func_1",
    "multi_turn_miss_param_2",
    "multi_turn_long_context_3",
)
MODES_BY_AGENT = {TRAIN_AGENT: "train", EVAL_AGENT: "eval"}
PROMPT_LENGTH = 8192
RESPONSE_LENGTH = 2048


def model_folder(folder: Path, tasks: Sequence[str] = TASKS, model_type: str = "qwen2") -> Path:
    """The tokenizer is trained on the texts the tests send, so prompts stay a few thousand tokens."""
    corpus: list[str] = []
    for task_id in tasks:
        for mode in ("train", "eval"):
            corpus += [message["content"] for message in Episode(task_id, mode=mode).reset()]
        corpus += ground_truth_actions(task_id)
    return build_chatml_model_folder(folder, corpus, model_type=model_type)


def trainer_config(
    folder: Path,
    response_length: int = RESPONSE_LENGTH,
    overrides: Sequence[str] = (),
    **rollout: Any,
) -> DictConfig:
    """verl's ppo_trainer composed with the model folder and SEAL's loops, plus `seal.rollout`: each caller
    gets its own copy of a composition made once per process for the same arguments (a second apiece)."""
    return copy.deepcopy(
        _trainer_config(folder, response_length, tuple(overrides), tuple(sorted(rollout.items())))
    )


@functools.cache
def _trainer_config(
    folder: Path, response_length: int, overrides: tuple[str, ...], rollout: tuple[tuple[str, Any], ...]
) -> DictConfig:
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(
            "ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={folder}",
                "actor_rollout_ref.rollout.name=vllm",
                f"data.max_prompt_length={PROMPT_LENGTH}",
                f"data.max_response_length={response_length}",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_config_path()}",
                *overrides,
            ],
        )
    with open_dict(config):
        config.seal = {"rollout": OmegaConf.structured(RolloutSettings(**dict(rollout)))}
    return config


def row(task_id: str, agent: str, index: int) -> dict[str, Any]:
    """A row as seal/dataset.py writes it (the prompt is the raw eval prompt)."""
    task = get_task(task_id)
    return {
        "raw_prompt": Episode(task, mode="eval").reset(),
        "agent_name": agent,
        "extra_info": {"task_id": task_id, "category": task.category, "split": "train", "index": index},
        "index": index,
        "data_source": task.category,
    }


async def conversation(
    task_id: str, mode: str, actions: Sequence[str], protocol: str = DEFAULT_PROTOCOL
) -> list[list[dict[str, str]]]:
    """Opening messages, then per action the environment's answer: what the tokens must render."""
    client = InProcessEnvClient()
    turns: list[list[dict[str, str]]] = []
    async with open_episode(client, task_id, mode, protocol) as episode:
        turns.append(episode.messages)
        for action in actions:
            stepped = await episode.step(action)
            turns.append(stepped["observation"])
            if stepped["done"]:
                break
    return turns


async def worker_samples(
    config: DictConfig, tokenizer: Any, tasks: Sequence[str]
) -> list[tuple[list[int], list[int], list[int]]]:
    """(prompt, response, response mask) of each task's ground truth in train mode, played by verl's own
    `AgentLoopWorker` on `config` (an RL experiment whose `seal.rollout.env_url` is a running service)."""
    server = ScriptedLLMServer(tokenizer, {(task, "train"): ground_truth_actions(task) for task in tasks})
    rows = [row(task, TRAIN_AGENT, i) for i, task in enumerate(tasks)]
    batch = await AgentLoopWorker(config, llm_client=server).generate_sequences(
        DataProto.from_single_dict(collate_fn(rows))
    )
    await close_shared_clients()
    width = batch.batch["prompts"].shape[1]
    samples = []
    for i in range(len(rows)):
        attention = batch.batch["attention_mask"][i]
        kept = int(attention[width:].sum())
        samples.append(
            (
                batch.batch["prompts"][i][attention[:width].bool()].tolist(),
                batch.batch["responses"][i][:kept].tolist(),
                batch.batch["response_mask"][i][:kept].tolist(),
            )
        )
    return samples
