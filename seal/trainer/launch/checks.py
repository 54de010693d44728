"""The launch checks that need more than the composed config's values (those are rows of
seal/trainer/launch/rules.py): verl's batch checks under static micro-batches, the model path against the
filesystem and the Hub's id syntax, and `--test`'s checkpoint protocol.

verl's `validate_config` skips its batch checks under packed micro-batches (`actor.use_dynamic_bsz`, SEAL's
default), so `check_verl_batches` runs them on a copy with static micro-batches.
"""

from __future__ import annotations

import contextlib
import copy
import io
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from seal.trainer.launch.rules import LaunchCheckError

MICRO_BATCH_KEYS = (
    ("actor_rollout_ref.actor", "ppo_micro_batch_size"),
    ("actor_rollout_ref.ref", "log_prob_micro_batch_size"),
    ("actor_rollout_ref.rollout", "log_prob_micro_batch_size"),
)
"""verl's micro-batch settings that static micro-batches need (each, or its deprecated global form)."""


def check_verl_batches(config: DictConfig, use_reference_policy: bool, use_critic: bool) -> None:
    """verl's `validate_config` on a copy of `config` with static micro-batches: under
    `actor.use_dynamic_bsz` verl skips its batch checks (the batch against the mini-batch, the
    trajectories against the GPUs), which hold for packed micro-batches alike. A micro-batch size the
    config leaves unset (packed ones need none) is 1 in the copy. Raises what `validate_config` raises."""
    from verl.utils.config import validate_config

    if not config.actor_rollout_ref.actor.use_dynamic_bsz:
        return
    static = copy.deepcopy(config)
    with open_dict(static):
        static.actor_rollout_ref.actor.use_dynamic_bsz = False
        for section, name in MICRO_BATCH_KEYS:
            node = OmegaConf.select(static, section)
            if node.get(name) is None and node.get(f"{name}_per_gpu") is None:
                node[f"{name}_per_gpu"] = 1
    with contextlib.redirect_stdout(io.StringIO()):  # verl prints its "all checks passed" once already
        validate_config(config=static, use_reference_policy=use_reference_policy, use_critic=use_critic)


def check_model_path(config: DictConfig) -> None:
    """`actor_rollout_ref.model.path` is a model folder, or a Hugging Face Hub id (`owner/name`, which
    verl downloads, or finds in the Hub cache, when training starts); a local path that holds no model is
    refused, as the SFT launch refuses it."""
    path = config.actor_rollout_ref.model.path
    if path is not None and (_is_model_folder(str(path)) or _is_hub_id(str(path))):
        return
    raise LaunchCheckError(
        f"actor_rollout_ref.model.path={path}: allowed: a model folder (holding config.json) or a "
        "Hugging Face Hub id (owner/name)"
    )


def _is_model_folder(path: str) -> bool:
    return (Path(path).expanduser() / "config.json").is_file()


def _is_hub_id(path: str) -> bool:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if path.count("/") != 1 or path.startswith((".", "~")) or Path(path).exists():
        return False
    try:
        validate_repo_id(path)
    except HFValidationError:
        return False
    return True


def check_test_protocol(config: DictConfig) -> None:
    """`--test` selects among the saved checkpoints by their val results: every checkpoint step must be a
    validation step (verl also saves and validates at the last step)."""
    trainer = config.trainer
    save, test = trainer.save_freq, trainer.test_freq
    if not isinstance(test, int) or test <= 0:
        raise LaunchCheckError(
            f"trainer.test_freq={test}: --test selects checkpoints by validation; allowed: an integer >= 1"
        )
    if not isinstance(save, int) or save <= 0 or save % test:
        raise LaunchCheckError(
            f"trainer.save_freq={save}: with --test, allowed: a multiple of trainer.test_freq ({test}), "
            "or checkpoints would have no val result to be selected by"
        )
