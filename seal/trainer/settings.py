"""The `seal:` section of a training config: the single source of its defaults, documentation and types.

The dataclasses are registered with Hydra's ConfigStore as the schema of the `seal` group
(`seal/config/seal_trainer.yaml` lists `seal: schema` in its defaults), so a value of the wrong type in
`seal.*` is refused when the config is composed, and `settings_from_config` checks the values (ranges,
names) by building the dataclasses. The `seal.apatch` section is `seal.tocf.APatchConfig` itself and the
interface presets come from `seal.env.interface`, so nothing here restates them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from seal.env.interface import PRESETS
from seal.env.store import StoreSettings
from seal.tocf.apatch import APatchConfig
from seal.tocf.labels import DEFAULT_PRIORITY, PAPER_TAXONOMY, TAXONOMIES, validate_priority
from seal.trainer.launch.kernel import ATTENTION_CHOICES, AUTO
from seal.trainer.rollout_settings import RolloutSettings

SCHEMA_GROUP = "seal"
SCHEMA_NAME = "schema"


@dataclass
class InterfaceSettings:
    """The training interface Ω (DESIGN §5), held by the environment service."""

    preset: str = "reference"
    """Ω's version 0: reference (" [required]" + note, what the released code ran) | full | none."""
    adapt: bool = True
    """Send C_t to the service after every step (Evolve) and Ω's profile again on resume."""

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"seal.interface.preset must be one of {list(PRESETS)}, got {self.preset!r}")


@dataclass
class SealSettings:
    """Everything SEAL adds to verl's `ppo_trainer` config."""

    taxonomy: str = "reference"
    """Diagnosis labels: reference (the released code's seven) | paper (the paper's §3.2 taxonomy)."""
    priority: list[str] = field(default_factory=lambda: list(DEFAULT_PRIORITY))
    """Order of the paper taxonomy's failure labels on a failing turn (DESIGN §4.1)."""
    interface: InterfaceSettings = field(default_factory=InterfaceSettings)
    apatch: APatchConfig = field(default_factory=APatchConfig)
    """A-Patch: `seal.tocf.APatchConfig` is the section's schema, defaults and checks."""
    rollout: RolloutSettings = field(default_factory=RolloutSettings)
    """The agent loop's settings; its `env_url` is also where the trainer sends C_t (Evolve)."""
    reset_window_each_epoch: bool = True
    """Start C_t's window afresh at every epoch, as the released code did; the total keeps counting."""
    attention: str = AUTO
    """Attention kernel of the actor and reference model: auto | flash_attention_2 | torch_varlen | sdpa.
    auto: flash-attention 2 where flash-attn imports, else torch's own varlen kernels (torch 2.10+; under LoRA
    without verl's fused kernels, the log-probs chunked), else padded sdpa. The launcher resolves it and sets
    the model's attn_implementation, use_remove_padding, use_fused_kernels and external_lib
    (seal/trainer/launch/kernel.py)."""
    test_after: bool = False
    """Right after the last step's validation, one greedy pass over the test split (data/bfcl_test.parquet,
    300 tasks) in the same launch: the same agent loop and rollout servers, so no second start-up and no
    checkpoint. Dumped as `<run>/test/global_step_N/N.jsonl` with `<run>/test_report.json`, the files
    `--test` writes, and logged as `test/...` metrics. Needs `trainer.test_freq >= 1` (verl validates the
    last step only then). `--test` still tests saved checkpoints in launches of their own."""
    test_before: bool = False
    """Right after verl's validation before the first step (a fresh launch, step 0), one greedy pass over the
    test split in the same launch: the start's test score, the baseline `test_after` is paired with (300
    tasks move less between equal models than the 100 val tasks). Dumped as `<run>/test/global_step_0/0.jsonl`
    and logged as `test/...` metrics at step 0; it writes no test report. Needs `trainer.val_before_train`."""
    finish_by: float | None = None
    """Unix time (seconds) by which the launch must be over: a cluster job's end, less what the job does after
    the launch. At the end of each step the next is made the last where a validation due now, one more step
    after the next (each as long as the longest so far) and what follows the last step (its validation and
    test pass, as long as those before the first step took, the test estimated from the validation task for
    task where none ran there, and its checkpoint, as long as the longest save so far) would end later; the
    first step is the last where, a step taken as long as those closing passes, even that would. The run then
    ends as a shorter run does, its last step validated, tested and saved, with `ended_early.json` in its
    folder (a resumed launch trains on to the planned last step); the learning-rate schedule keeps the
    planned length. None: every step runs. Needs `trainer.val_before_train` (seal/trainer/rl/finish_by.py)."""
    skip_update_without_signal: bool = True
    """Leave the actor as it is in a step where no row has a nonzero advantage (every GRPO group passed or
    failed alike; env_error rows count as zero): verl would still step the optimizer, and AdamW's moments
    move the weights on a zero gradient along the last steps' direction (measured in the 1.5B's closed loop,
    seed 3: docs/qwen_coder_1_5b.md). The step's rollouts, C_t, ρ and Evolve run as always and
    `seal/update_skipped` is 1; the learning-rate schedule does not advance in it. False: verl's update in
    every step."""

    def __post_init__(self) -> None:
        if self.taxonomy not in TAXONOMIES:
            raise ValueError(f"seal.taxonomy must be one of {list(TAXONOMIES)}, got {self.taxonomy!r}")
        if self.attention not in ATTENTION_CHOICES:
            raise ValueError(
                f"seal.attention must be one of {list(ATTENTION_CHOICES)}, got {self.attention!r}"
            )
        validate_priority(self.priority)
        if self.finish_by is not None and self.finish_by <= 0:
            raise ValueError(f"seal.finish_by must be a Unix time in seconds, got {self.finish_by!r}")
        if self.interface.adapt and self.rollout.env_backend == "inprocess":
            raise ValueError(
                "seal.interface.adapt needs seal.rollout.env_backend=http or ray (in-process stores never "
                "see Evolve)"
            )

    def store(self, max_episodes: int | None = None) -> StoreSettings:
        """The episode store of this run's environment (the service, each environment actor, the SFT rows'
        and the preflight's in-process stores): its taxonomy, priority and interface preset, and room for
        `max_episodes` open episodes (the store's default when None)."""
        room = {} if max_episodes is None else {"max_episodes": max_episodes}
        return StoreSettings(
            **room,
            interface_preset=self.interface.preset,
            taxonomy=self.taxonomy,
            priority=tuple(self.priority) if self.taxonomy == PAPER_TAXONOMY else None,
        )


def episode_capacity(config: DictConfig) -> int:
    """Open episodes one environment holds for a training run: twice a step's trajectories, at least the
    store's default."""
    in_flight = config.data.train_batch_size * config.actor_rollout_ref.rollout.n
    return max(StoreSettings().max_episodes, 2 * in_flight)


def settings_from_config(config: DictConfig | dict[str, Any]) -> SealSettings:
    """The checked `SealSettings` of a full training config (its `seal` section); ValueError when wrong."""
    section = config.get("seal") if isinstance(config, dict | DictConfig) else None
    if section is None:
        raise ValueError("the config has no `seal:` section (compose it from seal/config/seal_trainer.yaml)")
    merged = OmegaConf.merge(OmegaConf.structured(SealSettings), section)
    return OmegaConf.to_object(merged)


def register_schema() -> None:
    """Make `seal: schema` available to Hydra's defaults lists (idempotent)."""
    ConfigStore.instance().store(group=SCHEMA_GROUP, name=SCHEMA_NAME, node=SealSettings)


register_schema()
