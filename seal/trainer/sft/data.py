"""Behaviour-cloning data: every training task's ground truth, tokenised exactly as a SEAL rollout would be.

Each task of the train split is played through the real `SealAgentLoop` (same protocol, Ω, template
builder, environment observations and length limits as the RL experiment it is built from), with a
scripted server that "samples" the ground-truth action log (`seal.protocol.ground_truth`), each message
followed by the end-of-turn token. The row keeps the loop's own tokens: `input_ids` = prompt + response,
`loss_mask` = 0 on the prompt, then the loop's `response_mask` (1 on the assistant's tokens only).
`seal.trainer.sft.dataset` hands these rows to verl's SFT trainer unchanged.

Only train-split rows of `seal.dataset` are ever played, and `write_sft_parquet` refuses any other task.
"""

from __future__ import annotations

import asyncio
import functools
import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.dataset.rl_dataset import get_dataset_class
from verl.workers.config import HFModelConfig

from seal.bfcl.tasks import split_ids
from seal.dataset import rows as dataset_rows
from seal.env.client import InProcessEnvClient
from seal.env.store import EpisodeStore
from seal.protocol.ground_truth import ground_truth_actions
from seal.trainer.experiment import compose_experiment
from seal.trainer.rl.agent_loop import CHATML_END, SealAgentLoop, uses_chatml
from seal.trainer.rl.trajectory import TrajectoryFields
from seal.trainer.settings import SealSettings, settings_from_config
from seal.trainer.sft.scripted_server import ScriptedLLMServer

SFT_SPLIT = "train"
EPISODE_OVERRIDES = ("seal.rollout.env_backend=inprocess", "seal.interface.adapt=false")
"""The episodes run against an in-process store holding the configured Ω (no service, no Evolve)."""


class SFTDataError(ValueError):
    """Behaviour-cloning data that cannot be built or written; the message is one line."""


@dataclass(frozen=True)
class SFTRow:
    """One task's ground-truth conversation as the trained tokens of a SEAL rollout."""

    task_id: str
    category: str
    split: str
    input_ids: list[int]
    loss_mask: list[int]
    reward: float
    """The verifier's reward of the replayed ground truth: 1.0 unless a length limit cut the episode."""
    truncated: bool
    cut: str
    interface_version: int
    protocol: str


def episode_config(conf: Path | str, model_dir: Path | str, overrides: Sequence[str] = ()) -> DictConfig:
    """The RL experiment `conf` whose episodes the data replays, with `model_dir`'s tokenizer and an
    in-process environment."""
    return compose_experiment(
        conf, [f"actor_rollout_ref.model.path={model_dir}", *EPISODE_OVERRIDES, *overrides]
    )


@functools.cache
def _model_config(model: str) -> HFModelConfig:
    """verl's model config of one `actor_rollout_ref.model` section (its YAML): it loads the tokenizer twice,
    as the tokenizer and as the processor, seconds each; the experiments an SFT run replays, and its preflight
    and its rows, share one model."""
    return omega_conf_to_dataclass(OmegaConf.create(model))


class GroundTruthPlayer:
    """Plays ground-truth episodes through `SealAgentLoop`, built as verl's `AgentLoopWorker` builds it."""

    def __init__(self, config: DictConfig) -> None:
        self.config = config
        self.settings: SealSettings = settings_from_config(config)
        model = _model_config(OmegaConf.to_yaml(config.actor_rollout_ref.model, resolve=True))
        self.tokenizer = model.tokenizer
        self.processor = model.processor
        model_type = getattr(model.hf_config, "model_type", None)
        self.hf_model_type = model_type if isinstance(model_type, str) else None
        self.dataset_cls = get_dataset_class(config.data)
        self.client = InProcessEnvClient(EpisodeStore(self.settings.store()))
        self.end_token = CHATML_END if uses_chatml(self.tokenizer) else self.tokenizer.eos_token

    async def rollout(
        self, row: dict[str, Any], mode: str = "train"
    ) -> tuple[AgentLoopOutput, TrajectoryFields]:
        """The `mode` rollout of `row` (a `seal.dataset` row) whose every reply is the ground truth: train
        mode shows the configured Ω, eval mode the raw interface."""
        task_id = row["extra_info"]["task_id"]
        protocol = self.settings.rollout.protocol
        server = ScriptedLLMServer(
            self.tokenizer,
            {(task_id, mode): ground_truth_actions(task_id, protocol)},
            end_token=self.end_token,
        )
        loop = SealAgentLoop(
            trainer_config=DictConfigWrap(self.config),
            server_manager=server,
            tokenizer=self.tokenizer,
            processor=self.processor,
            dataset_cls=self.dataset_cls,
            data_config=DictConfigWrap(self.config.data),
            hf_model_type=self.hf_model_type,
            mode=mode,
        )
        loop.client = self.client  # the store with the configured Ω, not the default in-process one
        output = await loop.run({}, raw_prompt=row["prompt"], extra_info=row["extra_info"])
        return output, TrajectoryFields.from_extra_fields(output.extra_fields)

    async def play(self, row: dict[str, Any]) -> SFTRow:
        """The train-mode rollout of `row` as a behaviour-cloning row."""
        task_id = row["extra_info"]["task_id"]
        output, fields = await self.rollout(row)
        if fields.env_error:
            raise SFTDataError(
                f"{task_id}: the environment failed the ground-truth episode: {fields.env_error}"
            )
        return SFTRow(
            task_id=task_id,
            category=fields.category,
            split=fields.split,
            input_ids=[*output.prompt_ids, *output.response_ids],
            loss_mask=[0] * len(output.prompt_ids) + list(output.response_mask),
            reward=fields.reward,
            truncated=fields.truncated,
            cut=fields.cut,
            interface_version=fields.interface_version,
            protocol=fields.protocol,
        )


def train_rows(tasks: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The train split's dataset rows (all, or those of `tasks`; a task of another split is an error)."""
    wanted = set(split_ids(SFT_SPLIT) if tasks is None else tasks)
    outside = sorted(wanted - set(split_ids(SFT_SPLIT)))
    if outside:
        raise SFTDataError(f"not in the train split: {', '.join(outside[:5])}")
    return dataset_rows(SFT_SPLIT, wanted)


async def _play_all(player: GroundTruthPlayer, rows: list[dict[str, Any]]) -> list[SFTRow]:
    return [await player.play(row) for row in rows]


def sft_rows(config: DictConfig, tasks: Sequence[str] | None = None) -> list[SFTRow]:
    """Every train task's ground-truth rollout under `config` (an `episode_config`), in split order."""
    player = GroundTruthPlayer(config)
    return asyncio.run(_play_all(player, train_rows(tasks)))


def write_sft_parquet(rows: Sequence[SFTRow], path: Path) -> None:
    """Rows with at least one trained token, to `path`; any task outside the train split is refused."""
    train = set(split_ids(SFT_SPLIT))
    leaked = sorted({row.task_id for row in rows if row.task_id not in train or row.split != SFT_SPLIT})
    if leaked:
        raise SFTDataError(f"refusing to write tasks outside the train split: {', '.join(leaked[:5])}")
    kept = [asdict(row) for row in rows if any(row.loss_mask)]
    if not kept:
        raise SFTDataError("no row has a trained token (is max_prompt_length below every opening prompt?)")
    buffer = io.BytesIO()
    pd.DataFrame(kept).to_parquet(buffer, index=False, engine="pyarrow", compression="zstd")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
