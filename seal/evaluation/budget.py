"""The context budget of one reply: `max_tokens` never makes a call fail that a smaller one would serve.

The window is the model's context length (from the endpoint's `/models` or `--max-model-len`). Before
each call `max_tokens` is clamped to what the prompt leaves of it: the prompt is counted exactly with
`--tokenizer`, or estimated from the previous reply's `usage` (its prompt + completion tokens, a lower
bound, plus the new observation at the tokens-per-character rate that usage showed). When the server
still refuses for context length and says (or the tokenizer says) that the prompt alone fits, the call
is retried once with exactly what is left. Only a prompt known to fill the window alone ends the
episode as truncated — the same rule as training, where the conversation has outgrown the model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from seal.evaluation.endpoint import ChatEndpoint, Completion, ContextLengthError

TokenCounter = Callable[[list[dict[str, str]]], int]
"""Prompt tokens of a conversation as the served model's chat template renders it."""
TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Role markers and separators a chat template adds around each new message (an estimate)."""


def _chars(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages)


@dataclass
class ContextBudget:
    """`window`: the model's context length, None until known; `max_tokens`: the most a reply may take.

    Shared by the run's episodes: a window first learnt from a server's refusal serves them all.
    """

    max_tokens: int
    window: int | None = None
    count: TokenCounter | None = None

    def allowance(self, prompt_tokens: int | None) -> int | None:
        """`max_tokens` for a prompt of this size; None when the prompt alone fills the window."""
        if self.window is None or prompt_tokens is None:
            return self.max_tokens if self.window is None else min(self.max_tokens, self.window - 1)
        left = self.window - prompt_tokens
        return min(self.max_tokens, left) if left > 0 else None


@dataclass
class BudgetedChat:
    """One episode's conversation with the endpoint under a `ContextBudget`."""

    endpoint: ChatEndpoint
    budget: ContextBudget
    seen_tokens: int | None = None
    """The previous reply's prompt + completion tokens: a lower bound of the next prompt."""
    seen_messages: int = 0
    tokens_per_char: float | None = None

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

    def _remember(self, messages: list[dict[str, str]], completion: Completion) -> None:
        self.seen_tokens = completion.context_tokens
        self.seen_messages = len(messages) + 1
        if completion.prompt_tokens and _chars(messages):
            self.tokens_per_char = completion.prompt_tokens / _chars(messages)

    async def reply(self, messages: list[dict[str, str]]) -> Completion | None:
        """The model's reply, or None when the conversation no longer fits the window.

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
            if window is None or prompt is None or prompt >= window:
                return None
            try:
                completion = await self.endpoint.complete(
                    messages, min(self.budget.max_tokens, window - prompt)
                )
            except ContextLengthError:
                return None
        self._remember(messages, completion)
        return completion


def tokenizer_counter(directory: Path) -> TokenCounter:
    """Count prompt tokens with the served model's own tokenizer and chat template (a local folder)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"the tokenizer in {directory} has no chat template")

    def count(messages: list[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count
