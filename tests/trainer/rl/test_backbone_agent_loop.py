"""SealAgentLoop on the paper backbones' real tokenizers and chat templates, through verl's own
`AgentLoopWorker` on CPU with a scripted server: 64 trajectories per backbone (ground-truth tool calls, tool
responses, several user turns; some replies sampled as non-canonical token splits) whose trained tokens, masks
and log-prob positions are exact, checked token by token and by `benchmarks/check_masks.py`.

verl 0.9.1 gives `qwen2` its Qwen builder (the newline after a sampled `<|im_end|>`) and `llama` the generic
one; the Llama-3 template writes nothing after `<|eot_id|>`, so the generic builder is exact there, which the
ids below show."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import transformers
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import collate_fn
from verl.utils.tokenizer.chat_template import initialize_turn_separator
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder
from verl.workers.rollout.replica import TokenOutput

from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import CATEGORIES, category_of, split_ids
from seal.dataset import EVAL_AGENT, TRAIN_AGENT
from seal.env.connect import close_shared_clients
from seal.protocol import PythonListProtocol, QwenFCProtocol
from seal.protocol.ground_truth import END_OF_TURN, ground_truth_actions
from seal.trainer.rl.agent_loop import request_task, uses_chatml
from seal.trainer.rl.trajectory import TRAJECTORY_KEYS, TrajectoryFields
from seal.trainer.sft.scripted_server import ScriptedLLMServer
from tests.support.backbone_folders import tiny_folder
from tests.support.rollout_helpers import conversation, row, trainer_config
from tests.support.script_module import load_script

check_masks = load_script("check_masks")

PROTOCOL = {"qwen2.5-3b": "qwen_fc", "toolace-2-8b": "python_list"}
TASKS = [
    task
    for category in CATEGORIES
    for task in [t for t in split_ids("train") if category_of(t) == category][:4]
]
LOGPROB = -0.5
SPLIT = set(TASKS[::4])
"""One task per category whose replies are sampled one character at a time."""
LIMITS = ["data.max_prompt_length=10240", "actor_rollout_ref.rollout.max_model_len=16384"]
pytestmark = pytest.mark.heavy_setup  # `played`: 64 trajectories per backbone, seconds apiece


class SplitReplies(ScriptedLLMServer):
    """Samples the replies of the `split` tasks one character at a time: token ids a tokenizer would never
    produce for that text, as a sampling model may."""

    def __init__(self, *args: Any, split: set[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.split = split

    async def generate(self, request_id: str, **kwargs: Any):
        output = await super().generate(request_id, **kwargs)
        if request_task(request_id)[0] in self.split:
            text = self.tokenizer.decode(output.token_ids[:-1])
            pieces = [t for char in text for t in self.tokenizer.encode(char, add_special_tokens=False)]
            ids = [*pieces, output.token_ids[-1]]
            output = TokenOutput(token_ids=ids, log_probs=[self.logprob] * len(ids), stop_reason="completed")
        return output


@pytest.fixture(scope="module", params=list(PROTOCOL))
def played(request, released_backbones, tmp_path_factory) -> dict[str, Any]:
    """64 trajectories of one backbone: 16 train tasks x (2 train + 2 eval rows), traced."""
    name = request.param
    folder = tiny_folder(released_backbones[name], tmp_path_factory.mktemp(name) / "model")
    trace_dir = tmp_path_factory.mktemp(f"{name}-trace")
    protocol = PROTOCOL[name]
    config = trainer_config(
        folder,
        response_length=4096,
        overrides=LIMITS,
        env_backend="inprocess",
        protocol=protocol,
        trace_dir=str(trace_dir),
    )
    plans = {
        (task, mode): ground_truth_actions(task, protocol) for task in TASKS for mode in ("train", "eval")
    }
    rows = [
        row(task, agent, 4 * t + k)
        for t, task in enumerate(TASKS)
        for k, agent in enumerate((TRAIN_AGENT, TRAIN_AGENT, EVAL_AGENT, EVAL_AGENT))
    ]

    async def play() -> tuple[DataProto, AgentLoopWorker]:
        worker = AgentLoopWorker(config, llm_client=None)
        server = SplitReplies(
            worker.tokenizer, plans, logprob=LOGPROB, end_token=worker.tokenizer.eos_token, split=SPLIT
        )
        worker.llm_client = server  # the loops take it from here when the batch builds them
        batch = await worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows)))
        await close_shared_clients()
        return batch, worker

    batch, worker = asyncio.run(play())
    worker.llm_client.split = set()
    # The worker keeps tracing into `trace_dir` when later tests play on it: the 64 played here are kept
    # apart, so what a test reads does not depend on the tests run before it.
    played_dir = tmp_path_factory.mktemp(f"{name}-played")
    for trace in trace_dir.glob("*.jsonl"):
        shutil.copy2(trace, played_dir / trace.name)
    traces = [
        json.loads(line) for f in sorted(played_dir.glob("*.jsonl")) for line in f.read_text().splitlines()
    ]
    return {
        "name": name,
        "folder": folder,
        "trace_dir": played_dir,
        "batch": batch,
        "rows": rows,
        "tokenizer": worker.tokenizer,
        "traces": traces,
        "protocol": protocol,
        "worker": worker,
    }


def fields(batch: DataProto, i: int) -> TrajectoryFields:
    return TrajectoryFields.from_extra_fields(
        {key: batch.non_tensor_batch[key][i] for key in TRAJECTORY_KEYS}
    )


def test_every_ground_truth_trajectory_scores_one_with_the_real_tokenizer(played):
    got = [fields(played["batch"], i) for i in range(len(played["rows"]))]
    assert len(got) == 64 and len({(f.task_id, f.mode) for f in got}) == 32
    assert all(f.reward == 1.0 and f.cut == "none" and not f.env_error and f.llm_calls > 1 for f in got)
    assert all(f.protocol == played["protocol"] for f in got)
    assert sum(f.llm_calls for f in got) > 64 * 4  # multi-turn: several calls and user turns per episode


def test_trained_tokens_masks_and_log_probs_are_exact_token_by_token(played):
    tokenizer, batch = played["tokenizer"], played["batch"]
    glue = check_masks.TemplateGlue(tokenizer)
    separator = tokenizer.encode(glue.separator, add_special_tokens=False)
    by_task = {}
    for trace in played["traces"]:
        by_task.setdefault((trace["task_id"], trace["mode"]), []).append(trace)
    checked = 0
    for (task_id, mode), traces in by_task.items():
        actions = ground_truth_actions(task_id, played["protocol"])
        turns = asyncio.run(conversation(task_id, mode, actions, played["protocol"]))
        for trace in traces:
            runs = check_masks.mask_runs(trace["response_ids"], trace["response_mask"])
            sampled = [ids for bit, ids in runs if bit == 1]
            context = [ids for bit, ids in runs if bit == 0]
            assert [tokenizer.decode(ids, skip_special_tokens=True) for ids in sampled] == actions
            assert all(ids[-1] == tokenizer.eos_token_id for ids in sampled)
            assert context == [
                tokenizer.encode(glue.expected(observation), add_special_tokens=False)
                for observation in turns[1:-1]
            ]
            messages = list(turns[0])
            for action, observation in zip(actions, turns[1:], strict=True):
                messages += [{"role": "assistant", "content": action}, *observation]
            fresh = tokenizer.apply_chat_template(messages, tokenize=False)
            whole = [*trace["prompt_ids"], *trace["response_ids"], *separator]
            if task_id not in SPLIT:
                assert whole == tokenizer.encode(fresh, add_special_tokens=False)
            else:  # sampled one character at a time: the same text, other ids, kept as sampled
                assert whole != tokenizer.encode(fresh, add_special_tokens=False)
                assert tokenizer.decode(whole) == fresh
            checked += 1
    assert checked == 64
    for i in range(len(played["rows"])):
        mask = batch.batch["response_mask"][i]
        kept = int(batch.batch["attention_mask"][i][batch.batch["prompts"].shape[1] :].sum())
        logprobs = batch.batch["rollout_log_probs"][i][:kept].tolist()
        assert logprobs == [LOGPROB if bit else 0.0 for bit in mask[:kept].tolist()]


def test_check_masks_reports_64_of_64_exact(played, capsys, monkeypatch):
    loaded = {Path(played["folder"]): played["tokenizer"]}  # the folder's own, loaded once (seconds)
    # check_masks imports AutoTokenizer inside main (a fast --help): patch it where main finds it
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda folder: loaded[Path(folder)])
    assert check_masks.main([str(played["trace_dir"]), str(played["folder"])]) == 0
    out = capsys.readouterr().out
    assert "\n64/64 trajectories ok" in out and "[[S: " in out


def test_the_builder_verl_picks_and_the_template_separator_it_relies_on(played):
    """Qwen2.5's ChatML puts a newline after `<|im_end|>` that the Qwen builder restores; Llama-3 puts
    nothing after `<|eot_id|>`, so verl's generic builder (model_type `llama` has no entry) adds nothing."""
    tokenizer = played["tokenizer"]
    model_type = "qwen2" if played["name"].startswith("qwen") else "llama"
    builder = create_continuous_token_builder(tokenizer, hf_model_type=model_type)
    if model_type == "qwen2":
        assert isinstance(builder, QwenContinuousTokenBuilder) and uses_chatml(tokenizer)
        assert initialize_turn_separator(tokenizer) == tokenizer.encode("\n", add_special_tokens=False)
    else:
        assert type(builder) is ContinuousTokenBuilder and not uses_chatml(tokenizer)
        assert initialize_turn_separator(tokenizer) == []


def test_the_action_is_the_text_the_model_wrote_even_where_decoding_cleans_up_spaces(played):
    """Llama-3's released config sets `clean_up_tokenization_spaces`, which transformers 4.x applies on
    decode (" ," -> ","): the loop decodes without it, so the environment gets the call as written."""
    tokenizer, worker = played["tokenizer"], played["worker"]
    task = TASKS[0]
    writer = PROTOCOL[played["name"]]
    call = QwenFCProtocol if writer == "qwen_fc" else PythonListProtocol
    reply = call().format_calls([ToolCall("echo", {"content": "a , b . it 's"})])
    worker.llm_client.scripts[(task, "eval")] = [reply, END_OF_TURN]
    cleaning = {
        "clean_up_tokenization_spaces": True,
        "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output": True,
    }
    before = {key: getattr(tokenizer, key) for key in cleaning}
    assert tokenizer.decode(tokenizer.encode(reply, add_special_tokens=False)) == reply
    try:
        for key, value in cleaning.items():
            setattr(tokenizer, key, value)
        assert tokenizer.decode(tokenizer.encode(reply, add_special_tokens=False)) != reply
        batch = asyncio.run(
            worker.generate_sequences(DataProto.from_single_dict(collate_fn([row(task, EVAL_AGENT, 0)])))
        )
    finally:
        for key, value in before.items():
            setattr(tokenizer, key, value)
        worker.llm_client.scripts[(task, "eval")] = ground_truth_actions(task, played["protocol"])
    assert fields(batch, 0).actions[0] == reply


def test_a_reply_with_an_id_past_the_tokenizer_ends_the_trajectory_instead_of_reaching_vllm(played):
    """Qwen2.5's embedding has 151,936 rows for 151,665 tokens: a sampled padding id (random weights draw
    one every few hundred tokens) would make vLLM refuse the next prompt, so the reply is the last."""
    tokenizer, worker = played["tokenizer"], played["worker"]
    server, task = worker.llm_client, TASKS[0]
    padding_id = len(
        tokenizer
    )  # the first row past the tokenizer (Llama-3.1 has none: its ids end at 128255)
    original = server.generate

    async def with_padding_id(request_id, **kwargs):
        output = await original(request_id, **kwargs)
        ids = [*output.token_ids[:-1], padding_id, output.token_ids[-1]]
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")

    server.generate = with_padding_id
    try:
        rows = [row(task, EVAL_AGENT, 0)]
        batch = asyncio.run(worker.generate_sequences(DataProto.from_single_dict(collate_fn(rows))))
    finally:
        del server.generate
    got = fields(batch, 0)
    assert got.cut == "generation" and got.truncated and got.llm_calls == 1 and got.reward == 0.0
    response = batch.batch["responses"][0].tolist()
    assert padding_id in response and got.trained_tokens == got.response_tokens
