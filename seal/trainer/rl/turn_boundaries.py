"""The continuous-token builder that keeps a chat template's turn boundaries exact.

verl 0.9.1 picks the builder from `config.json`'s `model_type` only: `qwen2` gets the Qwen builder, which
puts back the newline ChatML writes after a sampled `<|im_end|>`; every type without an entry (`llama`
among them) gets the generic builder, which appends context right after the sampled end-of-turn token.
That is exact when the template writes nothing after its end-of-turn token (Llama-3's `<|eot_id|>`:
tests/trainer/rl/test_backbone_agent_loop.py) and wrong otherwise: a ChatML template on a `llama` model
(SmolLM2) needs the Qwen builder, and any other template with a separator would silently train on tokens no
full rendering has, so it is refused.
"""

from __future__ import annotations

import weakref
from typing import Any

from verl.utils.tokenizer.chat_template import initialize_turn_separator
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

_SEPARATORS: weakref.WeakKeyDictionary[Any, dict[str, list[int]]] = weakref.WeakKeyDictionary()


def turn_separator(tokenizer: Any, chat_template_kwargs: dict[str, Any]) -> list[int]:
    """The token ids the template writes after a turn's end-of-turn token (verl's own probe), once per
    tokenizer and template: verl builds an agent loop per trajectory."""
    known = _SEPARATORS.setdefault(tokenizer, {})
    template = tokenizer.chat_template or ""
    if template not in known:
        known[template] = initialize_turn_separator(tokenizer, **chat_template_kwargs)
    return known[template]


def exact_builder(tokenizer: Any, builder: Any, chatml: bool, chat_template_kwargs: dict[str, Any]) -> Any:
    """The builder that restores exactly what the template writes after a sampled end-of-turn token: the
    Qwen builder for a ChatML template (it restores one newline), `builder` otherwise. A model-specific
    builder verl matched to the model_type is kept as it is; with the generic one (it restores nothing) or a
    ChatML template whose separator is not one newline, a ValueError names what would go missing."""
    if chatml:
        if not isinstance(builder, QwenContinuousTokenBuilder):
            builder = create_continuous_token_builder(
                tokenizer, model_family="qwen", chat_template_kwargs=chat_template_kwargs
            )
        restored = tokenizer.encode("\n", add_special_tokens=False)
    elif type(builder) is ContinuousTokenBuilder:
        restored = []
    else:
        return builder
    separator = turn_separator(tokenizer, chat_template_kwargs)
    if separator != restored:
        raise ValueError(
            f"the chat template writes {tokenizer.decode(separator)!r} after its end-of-turn token, but the "
            f"continuous-token builder for config.json's model_type restores {tokenizer.decode(restored)!r}: "
            "every trained trajectory would hold tokens no rendering of the conversation has"
        )
    return builder
