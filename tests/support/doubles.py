"""Doubles for CPU tests and the benchmarks: a model folder verl can load without weights, and
trajectory facts with neutral defaults. (The scripted LLM server is `seal.trainer.sft.scripted_server`.)

Nothing here downloads anything: the tokenizer is trained in-process on the texts it will see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from seal.bfcl.tasks import category_of
from seal.trainer.rl.trajectory import TrajectoryFields
from tests.support.chatml import chatml_tokenizer


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
