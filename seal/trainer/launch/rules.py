"""Every rule a launch enforces, one row each: the key or keys it reads, what is allowed, why, what checking
it costs, and what checks it. The docs' settings reference renders this table
(scripts/make_docs_reference.py).

A launch goes compose -> check -> plan -> start (seal/trainer/launch/command.py), cheapest checks first:
- `command` and `compose` rows: the command line, each override's type and key, the experiment file;
- `config` rows: values of the composed config, run from this table by `check_launch_config` right after
  composing, before verl, Ray or torch are imported, so a wrong value is refused in a second or two (`files`
  rows of them read the train file's row count, no more);
- `engine` rows need verl's classes (its `validate_config`, its section dataclasses);
- `machine` and `service` rows read this machine's GPUs and libraries, or the environment service.
A `config` row's `check` returns the one-line refusal (naming the key and what is allowed) or None; every
other row names the function that enforces it, where its message is written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from omegaconf import DictConfig, OmegaConf

from seal.tocf.labels import DEFAULT_RHO, EXCLUDED, PAPER_LABELS, REFERENCE_LABELS
from seal.trainer.launch.engine_limits import lora_on_fsdp1_problem, token_budget_problem
from seal.trainer.launch.run_length import run_length

if TYPE_CHECKING:
    from seal.trainer.settings import SealSettings

Cost = Literal["command", "compose", "config", "files", "engine", "machine", "service"]
COST_ORDER: tuple[Cost, ...] = ("command", "compose", "config", "files", "engine", "machine", "service")
"""The order a launch meets the rows in: each cost class needs more loaded, read or started than the one
before."""
Check = Callable[[DictConfig, "SealSettings"], str | None]
TAXONOMY_LABELS = {"reference": REFERENCE_LABELS, "paper": PAPER_LABELS}


class LaunchCheckError(ValueError):
    """A config value that cannot train; the message is one line naming the key and what is allowed."""


@dataclass(frozen=True)
class Rule:
    """One rule of a launch: `keys` must satisfy `allowed`, because `why`."""

    keys: tuple[str, ...]
    allowed: str
    why: str
    cost: Cost
    check: Check | None = None
    """For `config` and `files` rows: the refusal of a composed RL config, or None when it passes."""
    enforced_by: str = ""
    """For the other rows: the function (module.name) that enforces the rule and writes its message."""

    @property
    def checker(self) -> str:
        """Where the rule is enforced, as module.name."""
        return self.enforced_by or f"{self.check.__module__}.{self.check.__qualname__}"  # type: ignore[union-attr]


@dataclass(frozen=True)
class Allowed:
    """The values a key takes: a number of `kind` from `low` (excluded when `open_low`) to `high`."""

    key: str
    kind: type
    low: float
    why: str
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

    def problem(self, config: DictConfig, settings: SealSettings) -> str | None:
        value = OmegaConf.select(config, self.key)
        if value is None and self.optional:
            return None
        fits = type(value) is int or (self.kind is float and type(value) is float and math.isfinite(value))
        if not fits or value > self.high or value < self.low or (self.open_low and value == self.low):
            return f"{self.key}={value}: allowed: {self.describe()}"
        return None

    def rule(self) -> Rule:
        return Rule((self.key,), self.describe(), self.why, "config", self.problem)


UNCHECKED_RANGE = "neither verl nor Hydra checks the range"
RANGES = (
    Allowed(
        "data.train_batch_size",
        int,
        1,
        f"{UNCHECKED_RANGE}: -3 once planned -134 steps an epoch, 0 divided by 0",
    ),
    Allowed(
        "actor_rollout_ref.actor.ppo_mini_batch_size",
        int,
        1,
        f"{UNCHECKED_RANGE}; the update splits the batch by it",
    ),
    Allowed(
        "actor_rollout_ref.rollout.n",
        int,
        1,
        "GRPO compares the rollouts of one prompt",
        note=" (rollouts per prompt)",
    ),
    Allowed("trainer.nnodes", int, 1, UNCHECKED_RANGE),
    Allowed("trainer.n_gpus_per_node", int, 1, UNCHECKED_RANGE),
    Allowed("data.max_prompt_length", int, 1, UNCHECKED_RANGE),
    Allowed("data.max_response_length", int, 1, UNCHECKED_RANGE),
    Allowed(
        "actor_rollout_ref.rollout.max_model_len",
        int,
        1,
        f"{UNCHECKED_RANGE}; null: vLLM's default",
        optional=True,
    ),
    Allowed(
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        float,
        0.0,
        "vLLM's share of a GPU's memory",
        1.0,
        open_low=True,
    ),
    Allowed(
        "actor_rollout_ref.actor.optim.lr", float, 0.0, "a run that cannot move its weights", open_low=True
    ),
    Allowed("trainer.total_epochs", int, 1, f"{UNCHECKED_RANGE}; the run length counts on it"),
    Allowed(
        "trainer.total_training_steps", int, 1, f"{UNCHECKED_RANGE}; null: the epochs' steps", optional=True
    ),
)


def v1_trainer_problem(config: DictConfig, settings: SealSettings) -> str | None:
    if config.trainer.use_v1:
        return None
    return "trainer.use_v1=false: SEAL runs on verl's V1 trainer (TransferQueue) only; leave it true"


def train_max_samples_problem(config: DictConfig, settings: SealSettings) -> str | None:
    value = config.data.get("train_max_samples", -1)
    if type(value) is not int or value == 0 or value < -1:
        return f"data.train_max_samples={value}: allowed: -1 (every train row) or an integer >= 1"
    return None


def batch_rows_problem(config: DictConfig, settings: SealSettings) -> str | None:
    batch, length = config.data.train_batch_size, run_length(config)
    if batch <= length.rows:
        return None
    cut = f" (data.train_max_samples={length.rows} of {length.all_rows})" if length.is_cut else ""
    return (
        f"data.train_batch_size={batch}: allowed: at most the {length.rows} train rows{cut}, or an epoch has "
        "no step"
    )


def mini_batch_problem(config: DictConfig, settings: SealSettings) -> str | None:
    batch, mini = config.data.train_batch_size, config.actor_rollout_ref.actor.ppo_mini_batch_size
    if mini <= batch:
        return None
    key = "actor_rollout_ref.actor.ppo_mini_batch_size"
    return f"{key}={mini}: allowed: at most data.train_batch_size ({batch})"


def gpu_split_problem(config: DictConfig, settings: SealSettings) -> str | None:
    data, trainer, rollout = config.data, config.trainer, config.actor_rollout_ref.rollout
    gpus, trajectories = trainer.nnodes * trainer.n_gpus_per_node, data.train_batch_size * rollout.n
    if trajectories % gpus == 0:
        return None
    return (
        f"trainer.n_gpus_per_node={trainer.n_gpus_per_node}: allowed: a GPU count that, times "
        f"trainer.nnodes ({trainer.nnodes}), divides a step's {trajectories} trajectories "
        f"(data.train_batch_size {data.train_batch_size} x actor_rollout_ref.rollout.n {rollout.n})"
    )


def model_length_problem(config: DictConfig, settings: SealSettings) -> str | None:
    response, model_len = (
        config.data.max_response_length,
        config.actor_rollout_ref.rollout.get("max_model_len"),
    )
    if model_len is None or response < model_len:
        return None
    return (
        f"data.max_response_length={response}: allowed: less than actor_rollout_ref.rollout.max_model_len "
        f"({model_len}), which also holds the prompt"
    )


def run_length_problem(config: DictConfig, settings: SealSettings) -> str | None:
    length = run_length(config)
    if length.asked_steps is None or length.asked_steps <= length.epoch_steps:
        return None
    return (
        f"trainer.total_epochs={length.epochs} ends the run after {length.epoch_steps} steps "
        f"({length.steps_per_epoch} per epoch: {length.rows} train rows // data.train_batch_size "
        f"{length.batch}), before trainer.total_training_steps={length.asked_steps}: allowed: "
        f"trainer.total_epochs >= {length.epochs_needed}, or fewer steps"
    )


def test_before_problem(config: DictConfig, settings: SealSettings) -> str | None:
    if not settings.test_before or config.trainer.get("val_before_train", True) is True:
        return None
    return (
        f"trainer.val_before_train={config.trainer.val_before_train}: with seal.test_before, allowed: true "
        "(the test pass follows the validation before the first step)"
    )


def finish_by_problem(config: DictConfig, settings: SealSettings) -> str | None:
    if settings.finish_by is None or config.trainer.get("val_before_train", True) is True:
        return None
    return (
        f"trainer.val_before_train={config.trainer.val_before_train}: with seal.finish_by, allowed: true "
        "(the validation before the first step times the closing passes the last step must leave room for)"
    )


def test_after_problem(config: DictConfig, settings: SealSettings) -> str | None:
    test_freq = config.trainer.test_freq
    if not settings.test_after or (type(test_freq) is int and test_freq >= 1):
        return None
    return (
        f"trainer.test_freq={test_freq}: with seal.test_after, allowed: an integer >= 1 (verl validates "
        "the last step, which the test pass follows, only then)"
    )


def rho_labels_problem(config: DictConfig, settings: SealSettings) -> str | None:
    weighable = [label for label in TAXONOMY_LABELS[settings.taxonomy] if label not in EXCLUDED]
    for label, weight in settings.apatch.rho.items():
        if label in weighable or DEFAULT_RHO.get(label) == weight:
            continue
        return (
            f"seal.apatch.rho.{label}: A-Patch weighs no label {label!r} under seal.taxonomy="
            f"{settings.taxonomy}; allowed: one of {', '.join(weighable)}"
        )
    return None


def _lora_rule(config: DictConfig, settings: SealSettings) -> str | None:
    return lora_on_fsdp1_problem(config)


def _token_budget_rule(config: DictConfig, settings: SealSettings) -> str | None:
    return token_budget_problem(config)


LAUNCH = "seal.trainer.launch"
RULES: tuple[Rule, ...] = (
    Rule(
        ("--conf",),
        "an existing exp/*.yaml, not a base config (seal/config)",
        "answered before anything slow is imported",
        "command",
        enforced_by=f"{LAUNCH}.command.check_conf",
    ),
    Rule(
        ("--test", "--with-bfcl", "--env-url", "--adopt-omega"),
        "none of them for an SFT experiment",
        "an SFT run has no environment service and no test split protocol",
        "command",
        enforced_by=f"{LAUNCH}.command.launch_sft",
    ),
    Rule(
        ("overrides",),
        "key=value, one value each (no sweep)",
        "one launch is one run",
        "compose",
        enforced_by=f"{LAUNCH}.override_types.check_override_types",
    ),
    Rule(
        ("overrides",),
        "a value of the type the key's default has (a number where verl's dataclass declares a float)",
        "verl's yaml is untyped: `trainer.test_freq=abc` composes and fails hours later",
        "compose",
        enforced_by=f"{LAUNCH}.override_types.check_override_types",
    ),
    Rule(
        ("overrides",),
        "a key something reads (with `did you mean`); `+key` only in an open map or a field of "
        "the section's dataclass; `~key` only of an open map's entry",
        "Hydra accepts `+trainer.tset_freq=5`, a key nobody reads",
        "compose",
        enforced_by=f"{LAUNCH}.override_keys.check_override_keys",
    ),
    Rule(
        ("experiment file keys",),
        "keys of the base config it composes, or ones something reads there",
        "Hydra merges an experiment file's misspelt key silently",
        "engine",
        enforced_by=f"{LAUNCH}.experiment_keys.check_experiment_keys",
    ),
    Rule(
        ("actor_rollout_ref.model.path", "model.path"),
        "not null",
        "experiments that train a model the user brings ship without one; the fix is an override",
        "compose",
        enforced_by=f"{LAUNCH}.model_need.missing_model",
    ),
    Rule(
        ("seal.*",),
        "each field's own check (the seal tables above)",
        "SealSettings validates its fields in `__post_init__`, beside the settings",
        "config",
        enforced_by="seal.trainer.settings.settings_from_config",
    ),
    Rule(
        ("trainer.use_v1",),
        "true",
        "SEAL runs on verl's V1 trainer (TransferQueue) only",
        "config",
        v1_trainer_problem,
    ),
    *(allowed.rule() for allowed in RANGES),
    Rule(
        ("data.train_max_samples",),
        "-1 (every train row) or an integer >= 1",
        "0 or below -1 leaves verl no rows, or means nothing",
        "config",
        train_max_samples_problem,
    ),
    Rule(
        ("data.train_batch_size", "data.train_max_samples", "data.train_files"),
        "batch <= train rows",
        "an epoch would have no step",
        "files",
        batch_rows_problem,
    ),
    Rule(
        ("actor_rollout_ref.actor.ppo_mini_batch_size", "data.train_batch_size"),
        "mini-batch <= batch",
        "verl skips this check under packed micro-batches (use_dynamic_bsz, SEAL's default)",
        "config",
        mini_batch_problem,
    ),
    Rule(
        ("trainer.n_gpus_per_node", "trainer.nnodes", "data.train_batch_size", "actor_rollout_ref.rollout.n"),
        "the GPUs divide a step's trajectories",
        "verl skips this check under packed micro-batches",
        "config",
        gpu_split_problem,
    ),
    Rule(
        ("data.max_response_length", "actor_rollout_ref.rollout.max_model_len"),
        "response < model length",
        "the model length also holds the prompt",
        "config",
        model_length_problem,
    ),
    Rule(
        ("trainer.total_epochs", "trainer.total_training_steps"),
        "the epochs hold the steps asked for",
        "verl's loop ends at whichever comes first, silently",
        "files",
        run_length_problem,
    ),
    Rule(
        ("seal.apatch.rho",),
        "labels A-Patch weighs under seal.taxonomy",
        "ρ0 of a label never emitted changes nothing",
        "config",
        rho_labels_problem,
    ),
    Rule(
        ("actor_rollout_ref.model.lora_rank", "actor_rollout_ref.actor.fsdp_config.strategy"),
        "LoRA on fsdp2",
        "under FSDP1 verl hands vLLM no adapter tensor and the first weight sync fails",
        "config",
        _lora_rule,
    ),
    Rule(
        ("*max_token_len_per_gpu", "data.max_prompt_length", "data.max_response_length"),
        "a packed budget of at least one whole trajectory",
        "verl asserts on the first long trajectory, after start-up and generation",
        "config",
        _token_budget_rule,
    ),
    Rule(
        ("actor_rollout_ref.model.path",),
        "a model folder (config.json) or a Hub id (owner/name)",
        "a local path without a model fails in every worker",
        "files",
        enforced_by=f"{LAUNCH}.checks.check_model_path",
    ),
    Rule(
        ("verl's config",),
        "what verl's `validate_config` accepts (LoRA ranks left to the GPU node where vLLM is absent)",
        "verl's own rules",
        "engine",
        enforced_by="seal.trainer.experiment.validate_experiment",
    ),
    Rule(
        ("data.train_batch_size", "actor_rollout_ref.*micro_batch_size*"),
        "verl's batch checks, with static micro-batches",
        "verl skips them under packed micro-batches, which they hold for alike",
        "engine",
        enforced_by=f"{LAUNCH}.checks.check_verl_batches",
    ),
    Rule(
        ("trainer.test_freq", "trainer.save_freq"),
        "with --test: save_freq a multiple of test_freq >= 1",
        "--test selects checkpoints by their val results",
        "config",
        enforced_by=f"{LAUNCH}.checks.check_test_protocol",
    ),
    Rule(
        ("seal.test_after", "trainer.test_freq"),
        "with seal.test_after: test_freq >= 1",
        "the test pass follows the last step's validation, which verl runs only then",
        "config",
        test_after_problem,
    ),
    Rule(
        ("seal.finish_by", "trainer.val_before_train"),
        "with seal.finish_by: val_before_train true",
        "the closing validation and test pass are timed on those before the first step",
        "config",
        finish_by_problem,
    ),
    Rule(
        ("seal.test_before", "trainer.val_before_train"),
        "with seal.test_before: val_before_train true",
        "the test pass before training follows the validation before the first step",
        "config",
        test_before_problem,
    ),
    Rule(
        ("seal.attention",),
        "a kernel this machine has",
        "a missing kernel fails in a worker, after start-up",
        "machine",
        enforced_by=f"{LAUNCH}.kernel.configure_attention",
    ),
    Rule(
        ("actor_rollout_ref.model.use_liger", "actor_rollout_ref.model.fused_kernel_options.impl_backend"),
        "liger-kernel (and, for its log-prob backend, NVIDIA's CuTe DSL) imports",
        "without them every worker fails, or the first log-prob",
        "machine",
        enforced_by=f"{LAUNCH}.liger.liger_problem",
    ),
    Rule(
        ("trainer.n_gpus_per_node", "trainer.nnodes"),
        "the GPUs are there (this machine's, or the Ray cluster's nodes')",
        "Ray would wait for them for ever",
        "machine",
        enforced_by=f"{LAUNCH}.command.gpu_problem",
    ),
    Rule(
        ("trainer.nnodes", "seal.rollout.env_backend", "--env-url"),
        "over several nodes: env_backend=ray or a service the other nodes reach",
        "workers on other nodes cannot reach a loopback service",
        "service",
        enforced_by=f"{LAUNCH}.environment.multi_node_problem",
    ),
    Rule(
        ("seal.rollout.env_backend", "--with-bfcl", "--env-url"),
        "no service flag with env_backend=ray",
        "the Ray backend uses no HTTP service",
        "service",
        enforced_by=f"{LAUNCH}.command.launch",
    ),
    Rule(
        ("data.train_files", "data.val_files"),
        "files that exist or are built from the BFCL splits",
        "a run without its data fails after start-up",
        "service",
        enforced_by="seal.trainer.preflight.check_data",
    ),
    Rule(
        ("seal.rollout.env_url", "seal.taxonomy"),
        "a service that answers one episode with the config's taxonomy",
        "a failing environment never trains the policy",
        "service",
        enforced_by=f"{LAUNCH}.environment.preflight",
    ),
    Rule(
        ("seal.interface.preset",),
        "the service holds the experiment's start Ω (or --adopt-omega)",
        "Evolve would go on from another run's interface",
        "service",
        enforced_by=f"{LAUNCH}.service_omega.omega_start",
    ),
    Rule(
        ("sft.*", "model.path", "data.train_batch_size"),
        "SFTSettings' checks, a model folder, a batch the GPUs divide",
        "an SFT experiment's own rules",
        "config",
        enforced_by=f"{LAUNCH}.sft.validate_sft",
    ),
)
"""Every rule a launch enforces, in the order a launch meets them within each cost class."""


def check_launch_config(config: DictConfig, settings: SealSettings) -> None:
    """LaunchCheckError for the first value of `config` (a composed RL experiment) that cannot train, in the
    table's order (the two `files` rows read only the train file's row count)."""
    for rule in RULES:
        problem = None if rule.check is None else rule.check(config, settings)
        if problem is not None:
            raise LaunchCheckError(problem)
