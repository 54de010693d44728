"""The `sft` config section: what SEAL adds to verl's SFT trainer config (exp/sft_warmstart.yaml).

The dataclass is the single source of the defaults and the Hydra schema (group `sft`, composed by
seal/config/seal_sft.yaml); it imports nothing of verl.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from seal.trainer.launch.kernel import ATTENTION_CHOICES, AUTO

SCHEMA_GROUP = "sft"
SCHEMA_NAME = "schema"
LOSS_WEIGHTINGS = ("token", "row")
UNTRAINED_TOKEN_HANDLINGS = {
    "initialise": "rows set to their pieces' mean, in a copy of the model",
    "split": "written as their pieces, by a copy of the model's tokenizer",
    "keep": "trained as they are",
}
"""The values of `untrained_tokens`, each with the words the launch plan shows for it."""


@dataclass
class SFTSettings:
    """Which episodes the behaviour-cloning data replays (seal.trainer.sft.data)."""

    episodes: str = "exp/SEAL.yaml"
    """The RL experiment whose train episodes are replayed with the ground truth: its protocol, interface Ω
    and lengths decide the tokens (relative paths: from the project root). Its model is replaced by
    `model.path`, whose tokenizer the data is built with."""
    extra_episodes: list[str] = field(default_factory=list)
    """Further RL experiments whose train episodes are replayed too, one row per task and experiment: one
    SFT model then starts every arm from prompts rendered as that arm trains on them (the `none` and the
    `reference` interface of exp/sft_learn.yaml's two arms)."""
    episode_overrides: list[str] = field(default_factory=list)
    """Hydra overrides of those experiments, e.g. a longer `data.max_response_length`."""
    untrained_tokens: str = "initialise"
    """What SFT does with an added token the model never trained (its rows equal those of the unused ids past
    the vocabulary, as Qwen2.5-Coder-1.5B-Instruct's `<tool_call>` and `</tool_call>`;
    seal.trainer.sft.untrained_tokens). `initialise`: its rows start as the mean of the rows of its text's
    pieces. `split`: the tokenizer no longer has it, so its text is written as those pieces, whose rows the
    model did train (the tokenizer of the plain behaviour-cloning loop that reached 16 % greedy val). Either
    is a copy of the model under the run folder, which SFT, its data and its checkpoints then use. `keep`:
    the model as it is. A model without such a token is trained as it is."""
    loss_weighting: str = "token"
    """How the loss weighs the batch's trained tokens. `token`: verl's own, every trained token of the global
    batch the same, so a row with many turns weighs more. `row`: each row's trained tokens share a weight of 1
    (the token mean of each row, averaged over the batch's rows), as a plain behaviour-cloning loop does; the
    data is the same, the class that reads it (seal.trainer.sft.dataset) scales the loss mask."""

    attention: str = AUTO
    """Attention kernel of the trained model: auto | flash_attention_2 | torch_varlen | sdpa, resolved as
    `seal.attention` is (seal/trainer/launch/kernel.py). auto: flash-attention 2 where flash-attn imports,
    else torch's own varlen kernels on packed rows (torch 2.10+), else sdpa with each micro-batch padded to
    its longest row. The launcher writes the choice into `model.override_config.attn_implementation`,
    `model.use_remove_padding` and `model.external_lib`."""

    def __post_init__(self) -> None:
        if self.attention not in ATTENTION_CHOICES:
            raise ValueError(
                f"attention must be one of {', '.join(ATTENTION_CHOICES)}, not {self.attention!r}"
            )
        if self.loss_weighting not in LOSS_WEIGHTINGS:
            raise ValueError(
                f"loss_weighting must be one of {', '.join(LOSS_WEIGHTINGS)}, not {self.loss_weighting!r}"
            )
        if self.untrained_tokens not in UNTRAINED_TOKEN_HANDLINGS:
            raise ValueError(
                f"untrained_tokens must be one of {', '.join(UNTRAINED_TOKEN_HANDLINGS)}, "
                f"not {self.untrained_tokens!r}"
            )

    @property
    def all_episodes(self) -> list[str]:
        """`episodes` then `extra_episodes`: the experiments the rows replay, in the data's order."""
        return [self.episodes, *self.extra_episodes]


def is_sft(config: DictConfig) -> bool:
    """An SFT experiment (composed from seal_sft) rather than an RL one (composed from seal_trainer)."""
    return SCHEMA_GROUP in config and "actor_rollout_ref" not in config


def sft_settings(config: DictConfig | dict[str, Any]) -> SFTSettings:
    """The checked `SFTSettings` of an SFT config; ValueError when wrong."""
    section = config.get(SCHEMA_GROUP)
    if section is None:
        raise ValueError("the config has no `sft:` section (compose it from seal/config/seal_sft.yaml)")
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SFTSettings), section))


def register_schema() -> None:
    """Make `sft: schema` available to Hydra's defaults lists (idempotent)."""
    ConfigStore.instance().store(group=SCHEMA_GROUP, name=SCHEMA_NAME, node=SFTSettings)


register_schema()
