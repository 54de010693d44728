"""Overhead of the rollout loop: ground-truth trajectories through verl's `AgentLoopWorker` running
`SealAgentLoop` against the HTTP service, and the same episodes replayed straight through the env
client, in one run on one machine.

    python benchmarks/bench_agent_loop.py                      # 256 trajectories (64 train tasks x 4)
    python benchmarks/bench_agent_loop.py --trajectories 64 --group 2

The model is a zero-latency scripted server (seal.trainer.sft.scripted_server) on a tiny ChatML tokenizer
trained in-process, so what is measured is the loop itself: environment round trips, token building (verl's
continuous-token helpers), verl's post-processing. Target: the loop's time <= 2x the bare replay's.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf, open_dict
from tqdm import tqdm

from seal.bfcl.tasks import CATEGORIES, get_task, split_ids
from seal.dataset import TRAIN_AGENT
from seal.env.client import EnvServiceError, HttpEnvClient, open_episode
from seal.env.connect import close_shared_clients
from seal.env.episode import Episode
from seal.env.process import running_service
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.rl.trajectory import TRAJECTORY_KEYS, TrajectoryFields
from seal.trainer.rollout_settings import RolloutSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite's doubles, shared with it

if TYPE_CHECKING:  # verl, transformers and the suite's doubles are imported where used: seconds to load
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto


def candidate_tasks(max_calls: int) -> list[str]:
    """The train tasks whose ground truth fits the call cap."""
    return [task_id for task_id in split_ids("train") if len(ground_truth_actions(task_id)) <= max_calls]


def ground_truth_conversation(task_id: str) -> list[dict[str, str]]:
    """The whole train-mode conversation of the task's ground truth, as the tokens will render it."""
    episode = Episode(task_id, mode="train")
    messages = episode.reset()
    for action in ground_truth_actions(task_id):
        messages = [*messages, {"role": "assistant", "content": action}, *episode.step(action).observation]
        if episode.done:
            break
    return messages


def fitting_tasks(
    tokenizer: Any,
    conversations: dict[str, list[dict[str, str]]],
    per_category: int,
    args: argparse.Namespace,
) -> list[str]:
    """The first `per_category` tasks per category whose ground truth fits the token budgets."""
    picked: dict[str, list[str]] = defaultdict(list)
    for task_id, messages in conversations.items():
        opening = len(tokenizer.encode(tokenizer.apply_chat_template(messages[:2], tokenize=False)))
        whole = len(tokenizer.encode(tokenizer.apply_chat_template(messages, tokenize=False)))
        category = get_task(task_id).category
        fits = opening <= args.prompt_length and whole - opening <= args.response_length
        if fits and len(picked[category]) < per_category:
            picked[category].append(task_id)
    short = [category for category in CATEGORIES if len(picked[category]) < per_category]
    if short:
        raise SystemExit(f"too few tasks fit the budgets in {', '.join(short)}; lower --trajectories")
    return [task_id for category in CATEGORIES for task_id in picked[category]]


class Phases:
    """Wall time per phase, summed over trajectories run one at a time (so the phases do not overlap)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    def wrap(self, owner: type, name: str, phase: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start

        setattr(owner, name, timed)

    def wrap_sync(self, owner: type, name: str, phase: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - start

        setattr(owner, name, timed)


def trainer_config(folder: Path, url: str, prompt_length: int, response_length: int) -> Any:
    import verl

    from seal.trainer.rl.agent_loop import agent_loop_config_path

    with initialize_config_dir(
        config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None
    ):
        config = compose(
            "ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={folder}",
                "actor_rollout_ref.rollout.name=vllm",
                f"data.max_prompt_length={prompt_length}",
                f"data.max_response_length={response_length}",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={agent_loop_config_path()}",
            ],
        )
    with open_dict(config):
        config.seal = {"rollout": OmegaConf.structured(RolloutSettings(env_url=url))}
    return config


async def run_loop(worker: AgentLoopWorker, rows: list[dict[str, Any]]) -> tuple[DataProto, float]:
    import numpy as np
    from verl.protocol import DataProto

    columns = {}
    for key in rows[0]:
        column = np.empty(len(rows), dtype=object)
        column[:] = [r[key] for r in rows]
        columns[key] = column
    start = time.perf_counter()
    batch = await worker.generate_sequences(DataProto.from_dict(non_tensors=columns))
    return batch, time.perf_counter() - start


async def replay(url: str, plan: Sequence[tuple[str, list[str]]], mode: str) -> tuple[list[float], float]:
    """The same episodes straight through the client, all at once, as the worker runs them."""
    bar = tqdm(total=len(plan), desc="bare replay", unit="ep", leave=False, file=sys.stderr)

    async def one(client: HttpEnvClient, task_id: str, actions: list[str]) -> float:
        async with open_episode(client, task_id, mode) as episode:
            for action in actions:
                if (await episode.step(action))["done"]:
                    break
        bar.update()
        return episode.result.reward if episode.result else 0.0

    async with HttpEnvClient(url) as client:
        start = time.perf_counter()
        rewards = await asyncio.gather(*(one(client, task_id, actions) for task_id, actions in plan))
        seconds = time.perf_counter() - start
    bar.close()
    return list(rewards), seconds


def cpu_seconds() -> float:
    times = psutil.Process().cpu_times()
    return times.user + times.system


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from seal.trainer.sft.scripted_server import ScriptedLLMServer
    from tests.support.doubles import build_chatml_model_folder

    per_category = args.trajectories // args.group // len(CATEGORIES)
    conversations = {
        task_id: ground_truth_conversation(task_id)
        for task_id in candidate_tasks(RolloutSettings().max_llm_calls)
    }
    with tempfile.TemporaryDirectory() as scratch, running_service() as service:
        texts = [message["content"] for messages in conversations.values() for message in messages]
        folder = build_chatml_model_folder(Path(scratch), texts, vocab_size=16000)
        tokenizer = AutoTokenizer.from_pretrained(folder)
        tasks = fitting_tasks(tokenizer, conversations, per_category, args)
        plan = [(task_id, ground_truth_actions(task_id)) for task_id in tasks for _ in range(args.group)]
        rows = [
            {
                "raw_prompt": Episode(task_id, mode="eval").reset(),
                "agent_name": TRAIN_AGENT,
                "extra_info": {"task_id": task_id},
                "index": i // args.group,
                "data_source": get_task(task_id).category,
            }
            for i, (task_id, _) in enumerate(plan)
        ]
        scripts = {(task_id, "train"): actions for task_id, actions in plan[:: args.group]}
        worker = AgentLoopWorker(
            trainer_config(folder, service.url, args.prompt_length, args.response_length),
            llm_client=ScriptedLLMServer(tokenizer, scripts),
        )
        await replay(service.url, plan[: args.group * 4], "train")  # warm-up: first episodes load lazily
        cpu = cpu_seconds()
        batch, loop_s = await run_loop(worker, rows)
        loop_cpu = cpu_seconds() - cpu
        await close_shared_clients()
        cpu = cpu_seconds()
        rewards, replay_s = await replay(service.url, plan, "train")
        replay_cpu = cpu_seconds() - cpu
        breakdown = await sequential_breakdown(worker, service.url, rows, plan, args.breakdown)
        await close_shared_clients()
    fields = [
        TrajectoryFields.from_extra_fields({key: batch.non_tensor_batch[key][i] for key in TRAJECTORY_KEYS})
        for i in range(len(rows))
    ]
    n = len(rows)
    return {
        "machine": f"{psutil.cpu_count()} cores, load average {psutil.getloadavg()[0]:.2f}",
        "trajectories": n,
        "tasks": len(tasks),
        "loop_trajectories_per_s": round(n / loop_s, 2),
        "replay_trajectories_per_s": round(n / replay_s, 2),
        "loop_over_replay_time": round(loop_s / replay_s, 2),
        "loop_wall_s": round(loop_s, 2),
        "replay_wall_s": round(replay_s, 2),
        "loop_client_cpu_s": round(loop_cpu, 2),
        "replay_client_cpu_s": round(replay_cpu, 2),
        "loop_rewards_1": sum(f.reward == 1.0 for f in fields),
        "replay_rewards_1": sum(r == 1.0 for r in rewards),
        "env_errors": sum(bool(f.env_error) for f in fields),
        "truncated": sum(f.truncated for f in fields),
        **breakdown,
    }


async def sequential_breakdown(
    worker: AgentLoopWorker,
    url: str,
    rows: list[dict[str, Any]],
    plan: Sequence[tuple[str, list[str]]],
    count: int,
) -> dict[str, Any]:
    """Where a trajectory's time goes: `count` trajectories one at a time (phases cannot overlap),
    against the same episodes replayed one at a time."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopWorker

    phases = Phases()
    for name in ("ct_build_initial_tokens", "ct_merge_assistant_token", "ct_merge_context_msg"):
        phases.wrap(AgentLoopBase, name, "token building")
    phases.wrap(AgentLoopWorker, "_agent_loop_postprocess", "verl post-processing (per trajectory)")
    phases.wrap_sync(AgentLoopWorker, "_postprocess", "verl post-processing (batch)")
    picked = range(0, len(rows), max(1, len(rows) // count))
    loop_s = env_s = gen_s = 0.0
    for i in picked:
        batch, seconds = await run_loop(worker, [rows[i]])
        loop_s += seconds
        fields = TrajectoryFields.from_extra_fields(
            {key: batch.non_tensor_batch[key][0] for key in TRAJECTORY_KEYS}
        )
        env_s += fields.env_seconds
        gen_s += fields.gen_seconds
    replay_s = 0.0
    for i in picked:
        replay_s += (await replay(url, [plan[i]], "train"))[1]
    shares = {
        "environment round trips": env_s,
        "scripted generation": gen_s,
        **phases.seconds,
    }
    shares["other (loop construction by verl, glue)"] = loop_s - sum(shares.values())
    per = 1000 / len(picked)
    return {
        "sequential_trajectories": len(picked),
        "sequential_loop_ms_per_trajectory": round(loop_s * per, 1),
        "sequential_replay_ms_per_episode": round(replay_s * per, 1),
        "sequential_loop_ms_by_phase": {phase: round(seconds * per, 1) for phase, seconds in shares.items()},
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=256, help="trajectories in the batch")
    parser.add_argument("--group", type=int, default=4, help="trajectories per task (GRPO group)")
    parser.add_argument("--prompt-length", type=int, default=8192, help="rollout.prompt_length (Table 4)")
    parser.add_argument("--response-length", type=int, default=4096, help="rollout.response_length (Table 4)")
    parser.add_argument(
        "--breakdown", type=int, default=32, help="trajectories run one at a time for the phases"
    )
    args = parser.parse_args(argv)
    if args.group < 1 or args.trajectories < args.group * len(CATEGORIES):
        parser.error("--trajectories must cover at least one task per category times --group")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = asyncio.run(bench(args))
    except EnvServiceError as exc:
        print(f"bench_agent_loop: environment failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2))
    return 0 if result["loop_rewards_1"] == result["trajectories"] else 1


if __name__ == "__main__":
    sys.exit(main())
