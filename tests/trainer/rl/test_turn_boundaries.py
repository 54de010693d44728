"""Which continuous-token builder SealAgentLoop keeps: the one that restores exactly what the chat template
writes after a sampled end-of-turn token, or a one-line refusal."""

from __future__ import annotations

import re

import pytest
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from seal.backbones.templates import LLAMA3_TEMPLATE
from seal.trainer.rl.agent_loop import uses_chatml
from seal.trainer.rl.turn_boundaries import exact_builder
from tests.support.chatml import CHATML_TEMPLATE, chatml_tokenizer

CORPUS = ["user assistant system hello there <|start_header_id|> <|end_header_id|> <s> </s>"] * 4


def tokenizer_with(template: str, eos: str = "<|im_end|>"):
    tokenizer = chatml_tokenizer(CORPUS, vocab_size=400)
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>", "</s>"]}
    )
    tokenizer.chat_template = template
    tokenizer.eos_token = eos
    return tokenizer


def chosen(tokenizer, model_type: str):
    builder = create_continuous_token_builder(tokenizer, hf_model_type=model_type)
    return exact_builder(tokenizer, builder, uses_chatml(tokenizer), {})


def test_chatml_gets_the_qwen_builder_whatever_the_model_type():
    for model_type in ("qwen2", "llama"):
        assert isinstance(chosen(tokenizer_with(CHATML_TEMPLATE), model_type), QwenContinuousTokenBuilder)


def test_a_template_with_nothing_after_its_end_of_turn_keeps_the_generic_builder():
    tokenizer = tokenizer_with(LLAMA3_TEMPLATE.replace("<|eot_id|>", "</s>"), eos="</s>")
    assert type(chosen(tokenizer, "llama")) is ContinuousTokenBuilder


@pytest.mark.parametrize(
    ("template", "eos", "dropped"),
    [
        (CHATML_TEMPLATE.replace("<|im_end|>\n", "<|im_end|>\n\n"), "<|im_end|>", "\n\n"),
        ("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}</s>\n{% endfor %}", "</s>", "\n"),
    ],
)
def test_a_separator_the_builder_does_not_restore_is_refused(template, eos, dropped):
    with pytest.raises(
        ValueError, match=re.escape(f"writes {dropped!r} after its end-of-turn token")
    ) as error:
        chosen(tokenizer_with(template, eos), "llama")
    assert "\n" not in str(error.value)
