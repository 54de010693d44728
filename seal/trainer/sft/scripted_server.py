"""A scripted `LLMServerClient`: verl's token-in, token-out server interface answered from given replies,
with no model and no latency. The CPU tests and the agent-loop benchmark play trajectories with it, and
the behaviour-cloning data (`seal.trainer.sft.data`) plays each task's ground truth through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from seal.trainer.rl.agent_loop import CHATML_END, request_task


@dataclass(frozen=True)
class Ramble:
    """A reply that never ends: `text` repeated until the call's `max_tokens` is used up."""

    text: str


Reply = str | Ramble


class ScriptedLLMServer:
    """Stands in for verl's `LLMServerClient`: the script of a trajectory is chosen by the task and
    mode in its request id (`seal.trainer.rl.agent_loop.trajectory_request_id`), then each call gives the
    next reply of the script, the last one repeated once the script runs out. A `str` reply is one
    whole assistant message (its tokens plus the end-of-turn token, ChatML's `<|im_end|>` unless
    `end_token` names another); every call is cut at its `max_tokens`, as vLLM does. Each sampled token
    gets log-prob `logprob`, so tests can see that the loop keeps them.
    """

    def __init__(
        self,
        tokenizer: Any,
        scripts: dict[tuple[str, str], Sequence[Reply]],
        logprob: float = -0.25,
        end_token: str = CHATML_END,
    ) -> None:
        self.tokenizer = tokenizer
        self.scripts = {key: list(replies) for key, replies in scripts.items()}
        self.logprob = logprob
        self.end_id = tokenizer.convert_tokens_to_ids(end_token)
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
