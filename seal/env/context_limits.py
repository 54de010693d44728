"""The limits of an episode as the model's context sees them: the released SEAL code's rules.

An episode is played on until the model has made `max_llm_calls` calls (all user turns together) or
until the next prompt would pass `max_model_len − max_response_length` tokens, so that every call can
still take a whole reply. Every environment message is clipped to `max_env_tokens` tokens, token-exact,
with a marker the model can read. The training response is cut at `max_response_length` afterwards;
the episode itself is never ended by that cut. The agent loop (training), `seal eval` and
`benchmarks/episode_budget.py` apply these same rules, so their numbers agree; `EpisodeBudget` holds the two
limits' defaults for all of them (`seal.rollout` inherits it, `seal eval` takes its flags from it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from seal.flags import setting

CUTS = ("none", "calls", "context", "generation")
"""What ended an episode before it was done: nothing, the call limit, the context (the next prompt would pass
the context limit, or the opening alone does), or a reply cut by its `max_tokens` (never sent)."""
CLIP_MARKER = "\n[... message cut: {shown} of its {total} tokens are shown ...]"
"""Appended to a clipped environment message; the numbers tell the model what it did not see."""

Encode = Callable[[str], Sequence[Any]]
"""Text to tokens (token ids, or the pieces of `character_codec`)."""
Decode = Callable[[Sequence[Any]], str]


@dataclass
class EpisodeBudget:
    """What one episode may use, in training and in `seal eval` alike: the released code's limits (paper
    Table 4: at most 20 interaction steps, each environment message clipped to `max_env_len` 4096)."""

    max_llm_calls: int = setting(
        20,
        "LLM calls per episode, all user turns together (Table 4's 20 interaction steps, counted per whole "
        "episode as the released code does); the call limit cuts the episode",
    )
    max_env_tokens: int | None = setting(
        4096,
        "each environment message the model reads is clipped to this many tokens, with a marker saying how "
        "much was cut (the released code's max_env_len); token-exact with the model's tokenizer",
    )

    def __post_init__(self) -> None:
        if self.max_llm_calls < 1:
            raise ValueError("max_llm_calls must be at least 1")
        if self.max_env_tokens is not None and self.max_env_tokens < 64:
            raise ValueError("max_env_tokens must be at least 64 (or null)")


@dataclass
class ContextLimits(EpisodeBudget):
    """`context_tokens`: the largest prompt a call may start from (max_model_len − max_response_length);
    None when the window is unknown. `max_env_tokens`: None leaves environment messages whole."""

    context_tokens: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.context_tokens is not None and self.context_tokens < 1:
            raise ValueError(
                "max_model_len − max_response_length leaves no room for a prompt: raise max_model_len"
            )

    def context_full(self, prompt_tokens: int) -> bool:
        """The next call may not start: its prompt would pass the context limit."""
        return self.context_tokens is not None and prompt_tokens >= self.context_tokens


def clip_tokens(text: str, encode: Encode, decode: Decode, limit: int | None) -> str:
    """`text` when it has at most `limit` tokens; else its head and `CLIP_MARKER`, `limit` tokens at most
    as `encode` counts them (decoding a cut and encoding again can merge tokens, so it is re-counted)."""
    if limit is None:
        return text
    ids = list(encode(text))
    if len(ids) <= limit:
        return text
    keep = limit - len(encode(CLIP_MARKER.format(shown=limit, total=len(ids))))
    while keep > 0:
        clipped = decode(ids[:keep]) + CLIP_MARKER.format(shown=keep, total=len(ids))
        excess = len(encode(clipped)) - limit
        if excess <= 0:
            return clipped
        keep -= excess
    return CLIP_MARKER.format(shown=0, total=len(ids)).strip()


def clip_messages(
    messages: Sequence[dict[str, str]], encode: Encode, decode: Decode, limit: int | None
) -> list[dict[str, str]]:
    """Each environment message clipped on its own, as the released code did."""
    return [{**m, "content": clip_tokens(m["content"], encode, decode, limit)} for m in messages]


def tokenizer_codec(tokenizer: object) -> tuple[Encode, Decode]:
    """`encode`/`decode` of a Hugging Face tokenizer on plain text (no special tokens added or kept)."""

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)  # type: ignore[attr-defined]

    def decode(ids: Sequence[int]) -> str:
        return tokenizer.decode(  # type: ignore[attr-defined]
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )

    return encode, decode


def character_codec(chars_per_token: int) -> tuple[Encode, Decode]:
    """Where no tokenizer is at hand (`seal eval` without `--tokenizer`): a token estimated as every
    `chars_per_token` characters, so the same clip cuts at about the same place."""

    def encode(text: str) -> list[str]:
        return [text[i : i + chars_per_token] for i in range(0, len(text), chars_per_token)]

    def decode(pieces: Sequence[Any]) -> str:
        return "".join(pieces)

    return encode, decode
