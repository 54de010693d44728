"""SealAgentLoop through verl's own `AgentLoopWorker` (legacy post-processing), built without Ray on a
tiny ChatML tokenizer, against the environment service over HTTP, with a scripted LLM server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import yaml
from omegaconf import OmegaConf, open_dict
from transformers import AutoTokenizer
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.dataset import EVAL_AGENT, TRAIN_AGENT
from seal.env.client import EnvServiceError, HttpEnvClient, InProcessEnvClient
from seal.env.connect import close_shared_clients
from seal.env.process import free_port, running_service
from seal.protocol import get_protocol
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions
from seal.trainer.rl import agent_loop
from seal.trainer.rl.agent_loop import agent_loop_config_path, request_task, rollout_settings
from seal.trainer.rl.trajectory import REWARD_EXTRA_INFO, TRAJECTORY_KEYS, TrajectoryFields
from seal.trainer.rollout_settings import RolloutSettings
from seal.trainer.sft.scripted_server import Ramble, ScriptedLLMServer
from tests.support.rollout_helpers import (
    MODES_BY_AGENT,
    TASKS,
    conversation,
    model_folder,
    row,
    trainer_config,
)
from tests.support.script_module import load_script
from tests.support.service_thread import service_in_thread

check_masks = load_script("check_masks")
mask_runs = check_masks.mask_runs

LOGPROB = -0.25
QUIET_SERVICE = ["--log-level", "warning"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return model_folder(tmp_path_factory.mktemp("chatml"))


@pytest.fixture(scope="module")
def tokenizer(folder: Path) -> Any:
    return AutoTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def service_url() -> Iterator[str]:
    with service_in_thread() as url:
        yield url


async def generate(
    folder: Path, tokenizer: Any, plans: dict[tuple[str, str], list[Any]], rows: list[dict], **config: Any
) -> tuple[DataProto, ScriptedLLMServer]:
    server = ScriptedLLMServer(tokenizer, plans, logprob=LOGPROB)
    worker = AgentLoopWorker(trainer_config(folder, **config), llm_client=server)
    batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
    await close_shared_clients()
    return batch, server


def sample(batch: DataProto, i: int) -> tuple[list[int], list[int], list[int]]:
    """Unpadded prompt ids, response ids and response mask of row i."""
    width = batch.batch["prompts"].shape[1]
    attention = batch.batch["attention_mask"][i]
    prompt = batch.batch["prompts"][i][attention[:width].bool()].tolist()
    kept = int(attention[width:].sum())
    return (
        prompt,
        batch.batch["responses"][i][:kept].tolist(),
        batch.batch["response_mask"][i][:kept].tolist(),
    )


def fields(batch: DataProto, i: int) -> TrajectoryFields:
    return TrajectoryFields.from_extra_fields(
        {key: batch.non_tensor_batch[key][i] for key in TRAJECTORY_KEYS}
    )


def ground_truth_batch() -> tuple[dict[tuple[str, str], list[Any]], list[dict]]:
    plans, rows = {}, []
    for agent, mode in MODES_BY_AGENT.items():
        for task_id in TASKS:
            plans[(task_id, mode)] = ground_truth_actions(task_id)
            rows.append(row(task_id, agent, len(rows)))
    rows.append(row(TASKS[0], TRAIN_AGENT, len(rows)))  # a GRPO sibling: same opening, own episode
    return plans, rows


@pytest.fixture(scope="module")
def ground_truth_run(folder, tokenizer, service_url) -> DataProto:
    plans, rows = ground_truth_batch()
    batch, _ = asyncio.run(generate(folder, tokenizer, plans, rows, env_url=service_url))
    return batch


# -- the legacy path ------------------------------------------------------------------------------------
async def test_ground_truth_scripts_score_one_on_all_four_categories_in_both_modes(
    ground_truth_run, service_url
):
    batch = ground_truth_run
    _, rows = ground_truth_batch()
    rewards = batch.batch["rm_scores"].sum(-1).tolist()
    assert rewards == [1.0] * len(rows)
    interface = await HttpEnvClient(service_url).get_interface()
    for i, source in enumerate(rows):
        got = fields(batch, i)
        task = get_task(source["extra_info"]["task_id"])
        assert (got.task_id, got.category, got.split) == (task.id, task.category, "train")
        assert got.mode == MODES_BY_AGENT[source["agent_name"]]
        assert got.reward == 1.0 and not got.truncated and got.env_error == ""
        assert len(got.labels) == task.num_turns
        assert set(got.labels) <= {"pass", "correct_abstention"}
        assert got.llm_calls == len(ground_truth_actions(task.id)) == len(got.actions)
        assert got.env_seconds > 0 and got.gen_seconds > 0
        if got.mode == "train":
            assert got.interface_version == interface["version"]
    miss_func = [i for i, r in enumerate(rows) if "miss_func" in r["extra_info"]["task_id"]]
    assert all("correct_abstention" in fields(batch, i).labels for i in miss_func)  # the reveal turn


async def test_every_sample_has_the_same_fields_and_a_dump_ready_reward_extra_info(ground_truth_run):
    batch = ground_truth_run
    assert set(TRAJECTORY_KEYS) <= set(batch.non_tensor_batch)
    info = batch.non_tensor_batch[REWARD_EXTRA_INFO]
    assert len({tuple(sorted(entry)) for entry in info}) == 1
    for i, entry in enumerate(info):
        assert all(isinstance(value, str | int | float | bool) for value in entry.values())
        assert "reward" not in entry  # verl's validation lists the scores under "reward" itself
        log = json.loads(entry["action_log"])
        assert log == {
            "task_id": entry["task_id"],
            "protocol": "qwen_fc",
            "actions": fields(batch, i).actions,
        }
        assert json.loads(entry["labels"]) == fields(batch, i).labels
    assert set(batch.meta_info["reward_extra_keys"]) == set(info[0])
    metrics = batch.meta_info["metrics"]
    assert [m["tool_calls"] for m in metrics] == [fields(batch, i).env_seconds for i in range(len(info))]
    assert [m["generate_sequences"] for m in metrics] == [
        fields(batch, i).gen_seconds for i in range(len(info))
    ]


async def test_trained_tokens_are_exactly_the_sampled_ones_and_the_rest_is_the_template(
    ground_truth_run, tokenizer
):
    batch = ground_truth_run
    _, rows = ground_truth_batch()
    probe = [{"role": "user", "content": "x"}]
    header = tokenizer.apply_chat_template(probe, tokenize=False, add_generation_prompt=True).removeprefix(
        tokenizer.apply_chat_template(probe, tokenize=False)
    )
    newline = tokenizer.encode("\n", add_special_tokens=False)
    for i, source in enumerate(rows):
        task_id, mode = source["extra_info"]["task_id"], MODES_BY_AGENT[source["agent_name"]]
        actions = ground_truth_actions(task_id)
        turns = await conversation(task_id, mode, actions)
        prompt, response, mask = sample(batch, i)
        runs = mask_runs(response, mask)
        sampled = [tokenizer.decode(ids) for bit, ids in runs if bit == 1]
        context = [tokenizer.decode(ids) for bit, ids in runs if bit == 0]
        assert sampled == [action + "<|im_end|>" for action in actions]
        assert context == [
            "\n" + tokenizer.apply_chat_template(observation, tokenize=False) + header
            for observation in turns[1:-1]
        ]
        messages = list(turns[0])
        for action, observation in zip(actions, turns[1:], strict=True):
            messages += [{"role": "assistant", "content": action}, *observation]
        fresh = tokenizer.encode(
            tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False
        )
        assert prompt + response + newline == fresh
        logprobs = batch.batch["rollout_log_probs"][i][: len(mask)].tolist()
        assert logprobs == [LOGPROB if bit else 0.0 for bit in mask]


async def test_traced_trajectories_pass_check_masks_and_a_flipped_mask_bit_fails_it(
    folder, tokenizer, service_url, tmp_path, capsys
):
    tasks = TASKS[:2]
    plans = {
        (task_id, mode): ground_truth_actions(task_id) for task_id in tasks for mode in ("train", "eval")
    }
    rows = [row(task_id, agent, i) for i, (task_id, agent) in enumerate(product(tasks, MODES_BY_AGENT))]
    trace_dir = tmp_path / "trace"
    await generate(folder, tokenizer, plans, rows, env_url=service_url, trace_dir=str(trace_dir))
    [trace_file] = trace_dir.glob("trajectories.*.jsonl")
    traces = [json.loads(line) for line in trace_file.read_text().splitlines()]
    assert sorted((t["task_id"], t["mode"]) for t in traces) == sorted(plans)
    for trace in traces:
        assert trace["sampled_texts"] == [a + "<|im_end|>" for a in plans[(trace["task_id"], trace["mode"])]]
    assert check_masks.main([str(trace_dir), str(folder)]) == 0
    assert "[[S: " in capsys.readouterr().out

    first = traces[0]["response_mask"]
    first[first.index(1)] = 0
    trace_file.write_text("".join(json.dumps(t) + "\n" for t in traces))
    assert check_masks.main([str(trace_dir), str(folder)]) == 1
    assert "FAIL 0:" in capsys.readouterr().err


async def test_eval_rows_open_with_the_raw_prompt_and_train_rows_with_the_interface(
    ground_truth_run, tokenizer
):
    batch = ground_truth_run
    _, rows = ground_truth_batch()
    for i, source in enumerate(rows):
        prompt, _, _ = sample(batch, i)
        raw = tokenizer.apply_chat_template(source["raw_prompt"], tokenize=False, add_generation_prompt=True)
        if source["agent_name"] == EVAL_AGENT:
            assert tokenizer.decode(prompt) == raw
        else:
            assert tokenizer.decode(prompt) != raw
            assert tokenizer.decode(prompt).endswith(raw.split("<|im_start|>user")[-1])


async def test_train_episodes_record_the_interface_version_they_ran_under(folder, tokenizer):
    task_id = "multi_turn_base_0"
    plans = {(task_id, mode): ground_truth_actions(task_id) for mode in ("train", "eval")}
    rows = [row(task_id, TRAIN_AGENT, 0), row(task_id, EVAL_AGENT, 1)]
    with service_in_thread() as url:
        async with HttpEnvClient(url) as client:
            before = (await client.get_interface())["version"]
            profile = {"version": 1, "window": {"trajectories": 1}, "total": {"trajectories": 1}}
            evolved = (await client.put_profile(profile))["version"]
        batch, _ = await generate(folder, tokenizer, plans, rows, env_url=url)
    assert evolved == before + 1
    assert fields(batch, 0).interface_version == evolved
    assert fields(batch, 1).interface_version != evolved
    assert batch.batch["rm_scores"].sum(-1).tolist() == [1.0, 1.0]


async def test_wrong_actions_score_zero_with_the_labels_the_rules_give(folder, tokenizer, service_url):
    """A model that never calls a tool: every ground-truth turn with calls is an empty model turn,
    every turn without calls a correct abstention (reference taxonomy)."""
    tasks = ("multi_turn_base_0", "multi_turn_miss_func_1")
    plans = {(task_id, "train"): [END_OF_TURN] for task_id in tasks}
    rows = [row(task_id, TRAIN_AGENT, i) for i, task_id in enumerate(tasks)]
    batch, _ = await generate(folder, tokenizer, plans, rows, env_url=service_url)
    assert batch.batch["rm_scores"].sum(-1).tolist() == [0.0, 0.0]
    for i, task_id in enumerate(tasks):
        expected = [
            "empty_turn_model_response" if calls else "correct_abstention"
            for calls in ground_truth_calls(get_task(task_id))
        ]
        got = fields(batch, i)
        assert got.labels == expected and got.reward == 0.0 and not got.truncated
        assert got.llm_calls == get_task(task_id).num_turns


async def test_limits_end_the_trajectory_truncated_with_reward_zero(folder, tokenizer, service_url):
    task_id = "multi_turn_base_0"
    first_call = next(call for turn in ground_truth_calls(get_task(task_id)) for call in turn)
    forever = get_protocol("qwen_fc").format_calls([ToolCall(first_call.name, first_call.arguments)])
    plans = {(task_id, "train"): [forever], (task_id, "eval"): [Ramble("and so on ")]}
    rows = [row(task_id, TRAIN_AGENT, 0), row(task_id, EVAL_AGENT, 1)]
    batch, server = await generate(
        folder, tokenizer, plans, rows, response_length=512, env_url=service_url, max_llm_calls=6
    )
    calls, rambles = fields(batch, 0), fields(batch, 1)
    assert batch.batch["responses"].shape[1] == 512
    assert calls.llm_calls == 6 and calls.truncated and calls.reward == 0.0 and calls.env_error == ""
    assert calls.cut == "calls" and calls.labels
    assert rambles.llm_calls == 1 and rambles.truncated and rambles.reward == 0.0 and rambles.actions == []
    assert rambles.cut == "generation" and rambles.trained_tokens == 512 and not rambles.trained_cut
    _, response, mask = sample(batch, 1)
    assert len(response) == 512 and all(mask)
    assert len(sample(batch, 0)[1]) <= 512
    assert batch.batch["rm_scores"].sum(-1).tolist() == [0.0, 0.0]
    assert server.calls == 7


async def test_an_episode_past_the_trained_cut_is_played_to_its_end_and_scored_there(
    folder, tokenizer, service_url
):
    """The response cap cuts what is trained, not the episode: the ground truth still scores 1, and its
    trained tokens stop at the cut."""
    task_id = "multi_turn_base_0"
    actions = ground_truth_actions(task_id)
    plans = {(task_id, "train"): actions}
    batch, server = await generate(
        folder,
        tokenizer,
        plans,
        [row(task_id, TRAIN_AGENT, 0)],
        response_length=64,
        env_url=service_url,
        max_tokens_per_call=1024,
    )
    got = fields(batch, 0)
    assert got.reward == 1.0 and got.cut == "none" and not got.truncated
    assert got.llm_calls == len(actions) == server.calls
    assert got.trained_cut and got.response_tokens > 64
    _, response, mask = sample(batch, 0)
    assert len(response) == 64 and got.trained_tokens == sum(mask) > 0
    assert batch.batch["rm_scores"].sum(-1).tolist() == [1.0]


async def test_a_long_tool_output_is_clipped_with_the_marker_and_the_episode_goes_on(
    folder, tokenizer, service_url, tmp_path
):
    task_id = "multi_turn_base_0"
    actions = ground_truth_actions(task_id)
    plans = {(task_id, "eval"): actions}
    turns = await conversation(task_id, "eval", actions)
    longest = max(len(tokenizer.encode(m["content"])) for turn in turns[1:] for m in turn)
    limit = max(64, longest // 2)
    trace_dir = tmp_path / "trace"
    batch, _ = await generate(
        folder,
        tokenizer,
        plans,
        [row(task_id, EVAL_AGENT, 0)],
        env_url=service_url,
        max_env_tokens=limit,
        trace_dir=str(trace_dir),
    )
    got = fields(batch, 0)
    assert got.reward == 1.0 and got.cut == "none" and got.llm_calls == len(actions)
    [trace] = [json.loads(line) for f in trace_dir.glob("*.jsonl") for line in f.read_text().splitlines()]
    seen = [m["content"] for observation in trace["observations"] for m in observation]
    clipped = [text for text in seen if "message cut:" in text]
    assert clipped and all(len(tokenizer.encode(text)) <= limit for text in seen)
    _, response, mask = sample(batch, 0)
    context = "".join(tokenizer.decode(ids) for bit, ids in mask_runs(response, mask) if bit == 0)
    assert all(text in context for text in clipped)


async def test_the_context_limit_stops_before_a_prompt_that_leaves_no_room_for_a_reply(
    folder, tokenizer, service_url
):
    """max_model_len − max_response_length bounds every prompt; the trajectory ends on the model's last
    reply (the observation it would never answer is dropped) and is scored by the environment."""
    task_id = "multi_turn_base_0"
    actions = ground_truth_actions(task_id)
    plans = {(task_id, "eval"): actions}
    first, _ = await generate(folder, tokenizer, plans, [row(task_id, EVAL_AGENT, 0)], env_url=service_url)
    opening = len(sample(first, 0)[0])
    first_reply = len(tokenizer.encode(actions[0])) + 1
    window = opening + 1024 + first_reply + 1  # room for the first reply, none after its observation
    batch, server = await generate(
        folder,
        tokenizer,
        plans,
        [row(task_id, EVAL_AGENT, 0)],
        response_length=1024,
        env_url=service_url,
        overrides=[f"actor_rollout_ref.rollout.max_model_len={window}"],
    )
    got = fields(batch, 0)
    assert got.cut == "context" and got.truncated and got.reward == 0.0 and got.labels
    assert got.llm_calls == server.calls == 1 < len(actions)
    _, response, mask = sample(batch, 0)
    assert got.response_tokens == len(response) == first_reply and all(mask)


async def test_an_opening_longer_than_prompt_length_is_not_played(folder, tokenizer, service_url):
    task_id = "multi_turn_base_0"
    plans = {(task_id, "train"): ground_truth_actions(task_id)}
    batch, server = await generate(
        folder,
        tokenizer,
        plans,
        [row(task_id, TRAIN_AGENT, 0)],
        env_url=service_url,
        overrides=["data.max_prompt_length=256"],
    )
    got = fields(batch, 0)
    prompt, response, mask = sample(batch, 0)
    assert got.truncated and got.cut == "context" and got.reward == 0.0
    assert got.llm_calls == 0 and server.calls == 0
    assert len(prompt) == 256 and mask == [0] and len(response) == 1
    assert got.labels and got.env_error == ""  # the environment scored the unplayed episode


async def test_per_call_max_tokens_never_exceeds_what_is_left(folder, tokenizer, service_url):
    task_id = "multi_turn_base_0"
    plans = {(task_id, "eval"): [Ramble("more ")]}
    batch, _ = await generate(
        folder,
        tokenizer,
        plans,
        [row(task_id, EVAL_AGENT, 0)],
        response_length=512,
        env_url=service_url,
        max_tokens_per_call=100,
    )
    got = fields(batch, 0)
    assert got.truncated and got.cut == "generation" and got.llm_calls == 1
    assert len(sample(batch, 0)[1]) == 100


async def test_a_chatml_model_typed_llama_still_gets_the_newline_after_im_end(tmp_path, service_url):
    folder = model_folder(tmp_path / "llama", tasks=("multi_turn_base_0",), model_type="llama")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    actions = ground_truth_actions("multi_turn_base_0")
    plans = {("multi_turn_base_0", "eval"): actions}
    batch, _ = await generate(
        folder, tokenizer, plans, [row("multi_turn_base_0", EVAL_AGENT, 0)], env_url=service_url
    )
    _, response, mask = sample(batch, 0)
    context = [tokenizer.decode(ids) for bit, ids in mask_runs(response, mask) if bit == 0]
    assert context and all(text.startswith("\n<|im_start|>user\n") for text in context)
    assert fields(batch, 0).reward == 1.0


async def test_a_service_killed_mid_batch_gives_env_errors_not_an_exception(folder, tokenizer):
    port = free_port()
    with running_service(QUIET_SERVICE, port=port) as service:
        quick, slow = ("multi_turn_base_0", "multi_turn_miss_param_2"), ("multi_turn_long_context_3",)
        plans = {(task_id, "train"): ground_truth_actions(task_id) for task_id in quick + slow}
        rows = [row(task_id, TRAIN_AGENT, i) for i, task_id in enumerate(quick + slow)]
        server = ScriptedLLMServer(tokenizer, plans)
        config = trainer_config(
            folder, env_url=service.url, env_retries=2, env_backoff_s=0.05, env_timeout_s=5
        )
        worker = AgentLoopWorker(config, llm_client=server)
        killed = asyncio.Event()

        async def slow_generate(request_id: str, **kwargs: Any) -> Any:
            """The slow task's model takes its time; its third call finds the service killed."""
            if request_task(request_id)[0] in slow:
                await asyncio.sleep(0.5)
                if server.calls_by_request.get(request_id) == 2 and not killed.is_set():
                    service.process.kill()
                    service.process.wait()
                    killed.set()
            return await ScriptedLLMServer.generate(server, request_id, **kwargs)

        server.generate = slow_generate  # type: ignore[method-assign]
        batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
        await close_shared_clients()
        assert killed.is_set()
        got = [fields(batch, i) for i in range(len(rows))]
        assert [(f.reward, f.env_error) for f in got[:2]] == [(1.0, ""), (1.0, "")]
        # played again from the start, which found the service gone: an env error without loss tokens
        assert got[2].reward == 0.0 and got[2].env_error.startswith("503") and got[2].llm_calls == 0
        assert server.calls_by_request and max(server.calls_by_request.values()) >= 3
        assert batch.batch["rm_scores"].sum(-1).tolist() == [1.0, 1.0, 0.0]
        assert sum(sample(batch, 2)[2]) == 0 and got[2].trained_tokens == 0
    with running_service(QUIET_SERVICE, port=port) as restarted:
        assert (await HttpEnvClient(restarted.url).health())["episodes_open"] == 0


class FailsOnce(InProcessEnvClient):
    """An environment whose first step fails as an unreachable service would."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        if not self.failed:
            self.failed = True
            raise EnvServiceError(503, "the service went away")
        return await super().step(episode_id, action)


async def test_a_trajectory_whose_environment_fails_once_is_played_again_from_the_start(
    folder, tokenizer, monkeypatch
):
    task_id = "multi_turn_base_0"
    actions = ground_truth_actions(task_id)
    flaky = FailsOnce()
    monkeypatch.setattr(agent_loop, "shared_client", lambda settings: flaky)
    batch, server = await generate(
        folder,
        tokenizer,
        {(task_id, "train"): actions},
        [row(task_id, TRAIN_AGENT, 0)],
        env_backend="inprocess",
    )
    got = fields(batch, 0)
    assert flaky.failed and got.env_error == "" and got.reward == 1.0
    assert got.llm_calls == len(actions) and server.calls == len(actions) + 1
    assert len(server.calls_by_request) == 2  # a new trajectory id for the second play
    assert got.trained_tokens == sum(sample(batch, 0)[2]) > 0


async def test_an_unreachable_service_gives_well_formed_zero_reward_trajectories(
    folder, tokenizer, refused_port
):
    plans = {("multi_turn_base_0", "train"): ground_truth_actions("multi_turn_base_0")}
    url = f"http://127.0.0.1:{refused_port}"
    start = time.monotonic()
    batch, server = await generate(
        folder,
        tokenizer,
        plans,
        [row("multi_turn_base_0", TRAIN_AGENT, 0)],
        env_url=url,
        env_retries=2,
        env_backoff_s=0.05,
    )
    got = fields(batch, 0)
    assert got.env_error.startswith("503") and "3 attempt(s)" in got.env_error and got.reward == 0.0
    assert got.labels == [] and got.interface_version == -1 and server.calls == 0
    prompt, response, mask = sample(batch, 0)
    assert prompt and len(response) == 1 and mask == [0]
    assert time.monotonic() - start < 30


# -- registration and settings ------------------------------------------------------------------------------
def test_the_packaged_loop_list_offers_both_dataset_agent_names():
    path = Path(agent_loop_config_path())
    assert path.is_absolute() and path.is_file()
    entries = yaml.safe_load(path.read_text())
    assert {entry["name"]: entry["mode"] for entry in entries} == {TRAIN_AGENT: "train", EVAL_AGENT: "eval"}
    assert {entry["_target_"] for entry in entries} == {"seal.trainer.rl.agent_loop.SealAgentLoop"}


def test_rollout_settings_defaults_follow_table_4_and_bad_values_are_refused(folder):
    defaults = RolloutSettings()
    assert defaults.max_llm_calls == 20 and defaults.protocol == "qwen_fc" and defaults.env_backend == "http"
    config = trainer_config(folder, env_backend="inprocess", max_llm_calls=7)
    assert rollout_settings(config) == RolloutSettings(env_backend="inprocess", max_llm_calls=7)
    with open_dict(config):
        del config["seal"]
    assert rollout_settings(config) == defaults
    bad_values = (
        {"env_backend": "grpc"},
        {"env_actors_per_node": 0},
        {"max_llm_calls": 0},
        {"protocol": "xml"},
        {"max_tokens_per_call": 0},
    )
    for bad in bad_values:
        with pytest.raises(ValueError, match=r"seal\.rollout"):
            RolloutSettings(**bad)
    with pytest.raises(ValueError, match=r"unknown seal\.rollout setting"):
        rollout_settings(OmegaConf.create({"seal": {"rollout": {"max_calls": 3}}}))
