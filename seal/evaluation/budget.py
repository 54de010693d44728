"""`seal eval`'s model for the episode driver (seal.env.driver): a chat endpoint under a context budget, in
which `max_tokens` never makes a call fail that a smaller one would serve.

The window is the model's context length (from the endpoint's `/models` or `--max-model-len`). The
episode limits are training's (`seal.env.context_limits`, applied by the driver): no call whose prompt would
pass
`window − max_tokens` (every call can still take a whole reply, as `max_model_len −
max_response_length` in training), at most `max_llm_calls` calls, and every environment message clipped
to `max_env_tokens` tokens. The prompt is counted exactly with `--tokenizer`, or estimated from the
previous reply's `usage` (its prompt + completion tokens, a lower bound, plus the new observation at the
tokens-per-character rate that usage showed); without a tokenizer the clip is estimated at that rate
too. When the server still refuses for context length and says (or the tokenizer says) how long the
prompt is, the call is retried once with what is left, unless the prompt is past the limit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seal.env.context_limits import (
    ContextLimits,
    Decode,
    Encode,
    EpisodeBudget,
    character_codec,
    clip_messages,
    tokenizer_codec,
)
from seal.env.driver import Reply
from seal.evaluation.endpoint import ChatEndpoint, Completion, ContextLengthError

TokenCounter = Callable[[list[dict[str, str]]], int]
"""Prompt tokens of a conversation as the served model's chat template renders it."""
TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Role markers and separators a chat template adds around each new message (an estimate)."""
TOKENS_PER_CHAR = 0.25
"""The clip's estimate before a reply's `usage` has shown the real rate (English text and JSON)."""


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


@dataclass(kw_only=True)
class ContextBudget(EpisodeBudget):
    """The episode limits plus `window`: the model's context length, None until known; `max_tokens`: the most
    a reply may take.

    Shared by the run's episodes: a window first learnt from a server's refusal serves them all.
    """

    max_tokens: int
    window: int | None = None
    count: TokenCounter | None = None
    codec: tuple[Encode, Decode] | None = None
    """The served model's tokenizer (`--tokenizer`): exact counts and an exact clip."""

    @property
    def limits(self) -> ContextLimits:
        context = None if self.window is None else max(1, self.window - self.max_tokens)
        return ContextLimits(self.max_llm_calls, self.max_env_tokens, context)

    def allowance(self, prompt_tokens: int | None) -> int | None:
        """`max_tokens` for a prompt of this size; None when the prompt is past the context limit."""
        if self.window is None or prompt_tokens is None:
            return self.max_tokens if self.window is None else min(self.max_tokens, self.window - 1)
        if self.limits.context_full(prompt_tokens):
            return None
        return min(self.max_tokens, self.window - prompt_tokens)


@dataclass
class BudgetedChat:
    """One episode's conversation with the endpoint under a `ContextBudget`: the driver's `Model`."""

    endpoint: ChatEndpoint
    budget: ContextBudget
    messages: list[dict[str, str]] = field(default_factory=list)
    seen_tokens: int | None = None
    """The previous reply's prompt + completion tokens: a lower bound of the next prompt."""
    seen_messages: int = 0
    tokens_per_char: float | None = None

    async def open(self, messages: list[dict[str, str]]) -> bool:
        """The opening is sent with the first call, whose budget says whether it fits."""
        self.messages = messages
        return True

    async def reply(self) -> Reply | None:
        """The model's reply to the conversation so far; None when it no longer fits the window. A reply
        cut by `max_tokens` (`finish_reason: length`) is not whole."""
        completion = await self.complete(self.messages)
        if completion is None:
            return None
        return Reply(completion.text, whole=completion.finish_reason != "length")

    async def observe(self, action: str, observation: list[dict[str, str]]) -> None:
        self.messages.append({"role": "assistant", "content": action})
        self.messages.extend(observation)

    def _allowed(self, messages: list[dict[str, str]]) -> int | None:
        """`max_tokens` for this call; None only when the prompt is known to fill the window."""
        if self.budget.count is not None:
            return self.budget.allowance(self.budget.count(messages))
        if self.seen_tokens is None or self.tokens_per_char is None:
            return self.budget.allowance(self.seen_tokens)
        new = messages[self.seen_messages :]
        grown = math.ceil(_chars(new) * self.tokens_per_char) + TEMPLATE_TOKENS_PER_MESSAGE * len(new)
        estimated = self.budget.allowance(self.seen_tokens + grown)
        return estimated if estimated is not None else self.budget.allowance(self.seen_tokens)

    def clip(self, observation: list[dict[str, str]]) -> list[dict[str, str]]:
        """Each environment message cut to `max_env_tokens` with `codec`'s counts (the OOD suites' loops;
        BFCL episodes are clipped by the driver)."""
        return clip_messages(observation, *self.codec(), self.budget.max_env_tokens)

    def codec(self) -> tuple[Encode, Decode]:
        """The clip's token counts: exact with the tokenizer, else estimated at the rate seen so far."""
        if self.budget.codec is not None:
            return self.budget.codec
        rate = self.tokens_per_char or TOKENS_PER_CHAR
        return character_codec(max(1, round(1 / rate)))

    def _remember(self, messages: list[dict[str, str]], completion: Completion) -> None:
        self.seen_tokens = completion.context_tokens
        self.seen_messages = len(messages) + 1
        if completion.prompt_tokens and _chars(messages):
            self.tokens_per_char = completion.prompt_tokens / _chars(messages)

    async def complete(self, messages: list[dict[str, str]]) -> Completion | None:
        """The endpoint's completion, or None when the conversation no longer fits the window.

        Raises `EndpointError` for what the endpoint itself failed (connection, 5xx, auth, bad body).
        """
        allowed = self._allowed(messages)
        if allowed is None:
            return None
        try:
            completion = await self.endpoint.complete(messages, allowed)
        except ContextLengthError as refusal:
            window = self.budget.window = refusal.window or self.budget.window
            prompt = refusal.prompt_tokens
            if prompt is None and self.budget.count is not None:
                prompt = self.budget.count(messages)
            if window is None or prompt is None or self.budget.allowance(prompt) is None:
                return None
            try:
                completion = await self.endpoint.complete(messages, self.budget.allowance(prompt))
            except ContextLengthError:
                return None
        self._remember(messages, completion)
        return completion


def tokenizer_tools(directory: Path) -> tuple[TokenCounter, tuple[Encode, Decode]]:
    """The served model's own tokenizer and chat template (a local folder): prompt counts and the clip."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"the tokenizer in {directory} has no chat template")

    def count(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count, tokenizer_codec(tokenizer)
