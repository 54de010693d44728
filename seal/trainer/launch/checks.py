"""The values of a composed RL config that cannot train, refused before anything starts, each in one line
that names the key and what is allowed.

verl's own checks are not enough: `validate_config` skips its batch checks under packed micro-batches
(`actor.use_dynamic_bsz`, SEAL's default), so `check_verl_batches` runs them on a copy with static
micro-batches; and neither verl nor Hydra checks ranges (`data.train_batch_size=-3` used to plan "-134
steps per epoch", `0` to divide by zero). The checks here are what SEAL adds: ranges, the batch against
the train rows, the mini-batch and the GPUs, a run length that `trainer.total_epochs` would cut short
(seal/trainer/launch/run_length.py), A-Patch weights of labels the taxonomy never emits, settings verl's
engine fails on mid-step (seal/trainer/launch/engine_limits.py), a model path that is neither a model folder
nor a Hub id, and, for `--test`, checkpoints without val results.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from seal.tocf.labels import DEFAULT_RHO, EXCLUDED, PAPER_LABELS, REFERENCE_LABELS
from seal.trainer.launch.engine_limits import engine_limit_problem
from seal.trainer.launch.run_length import run_length
from seal.trainer.settings import SealSettings

TAXONOMY_LABELS = {"reference": REFERENCE_LABELS, "paper": PAPER_LABELS}
MICRO_BATCH_KEYS = (
    ("actor_rollout_ref.actor", "ppo_micro_batch_size"),
    ("actor_rollout_ref.ref", "log_prob_micro_batch_size"),
    ("actor_rollout_ref.rollout", "log_prob_micro_batch_size"),
)
"""verl's micro-batch settings that static micro-batches need (each, or its deprecated global form)."""


class LaunchCheckError(ValueError):
    """A config value that cannot train; the message is one line naming the key and what is allowed."""


@dataclass(frozen=True)
class Allowed:
    """The values a key takes: a number of `kind` from `low` (excluded when `open_low`) to `high`."""

    key: str
    kind: type
    low: float
    high: float = math.inf
    open_low: bool = False
    optional: bool = False
    """null is allowed (and means verl's default)."""
    note: str = ""

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        bound = f"{'>' if self.open_low else '>='} {self.low:g}"
        if self.high != math.inf:
            bound += f" and <= {self.high:g}"
        return f"{what} {bound}{', or null' if self.optional else ''}{self.note}"

    def check(self, config: DictConfig) -> None:
        value = OmegaConf.select(config, self.key)
        if value is None and self.optional:
            return
        fits = type(value) is int or (self.kind is float and type(value) is float and math.isfinite(value))
        if not fits or value > self.high or value < self.low or (self.open_low and value == self.low):
            raise LaunchCheckError(f"{self.key}={value}: allowed: {self.describe()}")


RANGES = (
    Allowed("data.train_batch_size", int, 1),
    Allowed("actor_rollout_ref.actor.ppo_mini_batch_size", int, 1),
    Allowed("actor_rollout_ref.rollout.n", int, 1, note=" (rollouts per prompt)"),
    Allowed("trainer.nnodes", int, 1),
    Allowed("trainer.n_gpus_per_node", int, 1),
    Allowed("data.max_prompt_length", int, 1),
    Allowed("data.max_response_length", int, 1),
    Allowed("actor_rollout_ref.rollout.max_model_len", int, 1, optional=True),
    Allowed("actor_rollout_ref.rollout.gpu_memory_utilization", float, 0.0, 1.0, open_low=True),
    Allowed("actor_rollout_ref.actor.optim.lr", float, 0.0, open_low=True),
    Allowed("trainer.total_epochs", int, 1),
    Allowed("trainer.total_training_steps", int, 1, optional=True),
)


def check_launch_config(config: DictConfig, settings: SealSettings) -> None:
    """LaunchCheckError for the first value of `config` (a composed RL experiment) that cannot train."""
    for allowed in RANGES:
        allowed.check(config)
    _check_train_max_samples(config)
    _check_batches(config)
    _check_run_length(config)
    _check_rho_labels(settings)
    problem = engine_limit_problem(config)
    if problem is not None:
        raise LaunchCheckError(problem)


def _check_train_max_samples(config: DictConfig) -> None:
    value = config.data.get("train_max_samples", -1)
    if type(value) is not int or value == 0 or value < -1:
        raise LaunchCheckError(
            f"data.train_max_samples={value}: allowed: -1 (every train row) or an integer >= 1"
        )


def _check_batches(config: DictConfig) -> None:
    data, trainer = config.data, config.trainer
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    length = run_length(config)
    if data.train_batch_size > length.rows:
        cut = f" (data.train_max_samples={length.rows} of {length.all_rows})" if length.is_cut else ""
        raise LaunchCheckError(
            f"data.train_batch_size={data.train_batch_size}: allowed: at most the {length.rows} train "
            f"rows{cut}, or an epoch has no step"
        )
    if actor.ppo_mini_batch_size > data.train_batch_size:
        raise LaunchCheckError(
            f"actor_rollout_ref.actor.ppo_mini_batch_size={actor.ppo_mini_batch_size}: allowed: at most "
            f"data.train_batch_size ({data.train_batch_size})"
        )
    gpus, trajectories = trainer.nnodes * trainer.n_gpus_per_node, data.train_batch_size * rollout.n
    if trajectories % gpus:
        raise LaunchCheckError(
            f"trainer.n_gpus_per_node={trainer.n_gpus_per_node}: allowed: a GPU count that, times "
            f"trainer.nnodes ({trainer.nnodes}), divides a step's {trajectories} trajectories "
            f"(data.train_batch_size {data.train_batch_size} x actor_rollout_ref.rollout.n {rollout.n})"
        )
    model_len = rollout.get("max_model_len")
    if model_len is not None and data.max_response_length >= model_len:
        raise LaunchCheckError(
            f"data.max_response_length={data.max_response_length}: allowed: less than "
            f"actor_rollout_ref.rollout.max_model_len ({model_len}), which also holds the prompt"
        )


def _check_run_length(config: DictConfig) -> None:
    """A `trainer.total_training_steps` that `trainer.total_epochs` would cut short is refused: verl's
    loop ends at whichever comes first, silently."""
    length = run_length(config)
    if length.asked_steps is None or length.asked_steps <= length.epoch_steps:
        return
    raise LaunchCheckError(
        f"trainer.total_epochs={length.epochs} ends the run after {length.epoch_steps} steps "
        f"({length.steps_per_epoch} per epoch: {length.rows} train rows // data.train_batch_size "
        f"{length.batch}), before trainer.total_training_steps={length.asked_steps}: allowed: "
        f"trainer.total_epochs >= {length.epochs_needed}, or fewer steps"
    )


def _check_rho_labels(settings: SealSettings) -> None:
    """ρ0 of a label A-Patch never weighs under the taxonomy (one it never emits, or a judge's error)
    changes nothing; only DEFAULT_RHO's own entries, which cover both taxonomies, may stay at their
    default."""
    weighable = [label for label in TAXONOMY_LABELS[settings.taxonomy] if label not in EXCLUDED]
    for label, weight in settings.apatch.rho.items():
        if label in weighable or DEFAULT_RHO.get(label) == weight:
            continue
        raise LaunchCheckError(
            f"seal.apatch.rho.{label}: A-Patch weighs no label {label!r} under seal.taxonomy="
            f"{settings.taxonomy}; allowed: one of {', '.join(weighable)}"
        )


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
