"""Which experiments ship without a model, and the one line that says how to give them one.

An exp/*.yaml whose model path is null (the GPU smoke, learning-recipe and SFT experiments: they train a model
the user builds or brings) cannot be checked further; the launch refuses it before verl's checks run, with the
override that fixes it. `needs_model` is the same fact for a table of the configs.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from seal.trainer.sft_settings import is_sft

RL_MODEL_KEY = "actor_rollout_ref.model.path"
SFT_MODEL_KEY = "model.path"
MODEL_BUILDER = "scripts/make_smoke_model.py"
"""What builds a model folder offline (SmolLM2-135M-Instruct, a tiny random one, the paper backbones)."""


def model_key(config: DictConfig) -> str:
    """The key that names the model an experiment trains: the actor's for RL, `model.path` for SFT."""
    return SFT_MODEL_KEY if is_sft(config) else RL_MODEL_KEY


def needs_model(config: DictConfig) -> bool:
    """True when the composed experiment leaves its model path null: the user must give one."""
    return OmegaConf.select(config, model_key(config)) is None


def model_source(config: DictConfig) -> str:
    """What gives an experiment its model folder, in words."""
    built = f"a Hugging Face model folder, e.g. one built by {MODEL_BUILDER}"
    return built if is_sft(config) else f"{built} or the SFT model an exp/sft_*.yaml launch prints"


def missing_model(conf: Path, config: DictConfig) -> str | None:
    """The one-line fix for an experiment without a model, or None when it names one."""
    if not needs_model(config):
        return None
    return f"{conf} needs a model: add `-- {model_key(config)}=DIR` ({model_source(config)})"
