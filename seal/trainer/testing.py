"""Rollout doubles for CPU tests and the agent-loop benchmark: a model folder verl can load without
weights, and a scripted `LLMServerClient` that answers token in, token out, with no model and no latency.

Nothing here downloads anything: the tokenizer is trained in-process on the texts it will see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from seal.bfcl.tasks import category_of
from seal.trainer.agent_loop import request_task
from seal.trainer.chatml import chatml_tokenizer
from seal.trainer.trajectory import TrajectoryFields


def trajectory_fields(task_id: str, **changes: Any) -> TrajectoryFields:
    """A trajectory of `task_id` (its category from the id) with neutral facts, except the `changes` a test
    or benchmark is about."""
    neutral: dict[str, Any] = {
        "category": category_of(task_id),
        "mode": "train",
        "labels": [],
        "taxonomy": "reference",
        "interface_version": 0,
        "reward": 0.0,
        "llm_calls": 1,
        "truncated": False,
        "env_error": "",
        "env_seconds": 0.0,
        "gen_seconds": 0.0,
        "actions": [],
        "protocol": "qwen_fc",
    }
    return TrajectoryFields(task_id=task_id, **{**neutral, **changes})


def build_chatml_model_folder(
    folder: Path, corpus: Iterable[str], vocab_size: int = 4000, model_type: str = "qwen2"
) -> Path:
    """`chatml_tokenizer` and a weightless `config.json`: verl's `HFModelConfig` needs the tokenizer
    and a config with one `architectures` entry, not weights."""
    folder.mkdir(parents=True, exist_ok=True)
    fast = chatml_tokenizer(corpus, vocab_size)
    fast.save_pretrained(folder)
    architecture = {"qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}[model_type]
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": len(fast),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 65536,
        "eos_token_id": fast.eos_token_id,
        "pad_token_id": fast.pad_token_id,
        "bos_token_id": fast.pad_token_id,
        "tie_word_embeddings": True,
    }
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return folder


@dataclass(frozen=True)
class Ramble:
    """A reply that never ends: `text` repeated until the call's `max_tokens` is used up."""

    text: str


Reply = str | Ramble


class ScriptedLLMServer:
    """Stands in for verl's `LLMServerClient`: the script of a trajectory is chosen by the task and
    mode in its request id (`seal.trainer.agent_loop.trajectory_request_id`), then each call gives the
    next reply of the script, the last one repeated once the script runs out. A `str` reply is one
    whole assistant message (its tokens plus `<|im_end|>`); every call is cut at its `max_tokens`, as
    vLLM does. Each sampled token gets log-prob `logprob`, so tests can see that the loop keeps them.
    """

    def __init__(
        self, tokenizer: Any, scripts: dict[tuple[str, str], Sequence[Reply]], logprob: float = -0.25
    ) -> None:
        self.tokenizer = tokenizer
        self.scripts = {key: list(replies) for key, replies in scripts.items()}
        self.logprob = logprob
        self.end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.calls = 0
        self.calls_by_request: dict[str, int] = {}
        self._tokens: dict[Reply, list[int]] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Shipped to Ray actors without the trajectories in flight."""
        return {**self.__dict__, "calls_by_request": {}}

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        replies = self.scripts[request_task(request_id)]
        index = self.calls_by_request.get(request_id, 0)
        self.calls_by_request[request_id] = index + 1
        self.calls += 1
        reply = replies[min(index, len(replies) - 1)]
        tokens = self._reply_tokens(reply, int(sampling_params["max_tokens"]))
        return TokenOutput(token_ids=tokens, log_probs=[self.logprob] * len(tokens), stop_reason="completed")

    def _reply_tokens(self, reply: Reply, max_tokens: int) -> list[int]:
        tokens = self._tokens.get(reply)
        if tokens is None:
            if isinstance(reply, Ramble):
                tokens = self.tokenizer.encode(reply.text, add_special_tokens=False)
            else:
                tokens = [*self.tokenizer.encode(reply, add_special_tokens=False), self.end_id]
            self._tokens[reply] = tokens
        if isinstance(reply, Ramble):
            return (tokens * (max_tokens // len(tokens) + 1))[:max_tokens]
        return tokens[:max_tokens]
