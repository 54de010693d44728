"""verl's `validate_config` checks a LoRA rank against vLLM's allowed ranks by importing verl's vLLM rollout,
whose import fails where vLLM is not installed (a login node, CI): "vllm version None not supported", for any
LoRA config, though the GPU node that trains it has vLLM. There verl's checks run on a copy without the
adapter, and the rank is left to verl's check on the node, before Ray starts."""

from __future__ import annotations

import copy
import importlib.util

from omegaconf import DictConfig, open_dict

from seal.trainer.launch.engine_limits import uses_lora


def vllm_installed() -> bool:
    """Whether vLLM is installed here (found, not imported: importing it takes seconds)."""
    return importlib.util.find_spec("vllm") is not None


def for_verl_checks(config: DictConfig) -> DictConfig:
    """`config` itself, or, for LoRA where vLLM is not installed, a copy whose actor has no adapter."""
    if not uses_lora(config) or vllm_installed():
        return config
    checkable = copy.deepcopy(config)
    model = checkable.actor_rollout_ref.model
    with open_dict(model):
        model.lora_rank = 0
        if model.get("lora") is not None:
            model.lora.rank = 0
    return checkable
