"""A tiny Qwen2 with added tokens it never trained, as Qwen2.5-Coder-1.5B-Instruct's `<tool_call>`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

PLACEHOLDER = 0.01
"""Every entry of the rows past the vocabulary, and of an untrained token's rows."""


def save_with_untrained_rows(
    folder: Path, tokenizer: Any, untrained_input: Sequence[str], untrained_output: Sequence[str]
) -> Path:
    """`tokenizer` and a tiny untied Qwen2 whose embedding matrices have 16 rows past the vocabulary, all the
    placeholder; the rows of `untrained_input` (input matrix) and `untrained_output` (output matrix) are the
    placeholder too."""
    config = Qwen2Config(
        vocab_size=len(tokenizer) + 16,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    matrices = {
        model.get_input_embeddings().weight: untrained_input,
        model.get_output_embeddings().weight: untrained_output,
    }
    with torch.no_grad():
        for weight, untrained in matrices.items():
            weight[len(tokenizer) :] = PLACEHOLDER
            if untrained:
                weight[tokenizer.convert_tokens_to_ids(list(untrained))] = PLACEHOLDER
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
