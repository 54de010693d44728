"""SFT experiments (exp/sft_warmstart.yaml): check, preflight, plan, build the data, train, find the model.

verl 0.9.1's SFT trainer (`verl.trainer.sft_trainer`) is an SPMD program without Ray: one process per GPU,
started by torchrun, each reading its Hydra config. The launcher records the resolved config and hands it
to verl's own entry point (`--config-path/--config-name`), so the run is exactly the recorded one. With
`hf_model` in `checkpoint.save_contents`, verl writes a full Hugging Face folder (weights, config,
tokenizer) into each checkpoint: `global_step_N/huggingface`, the folder `actor_rollout_ref.model.path` takes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from seal.bfcl.tasks import CATEGORIES, split_ids
from seal.trainer.experiment import PROJECT_ROOT, ExperimentError
from seal.trainer.launch.kernel import AttentionChoice
from seal.trainer.sft.data import (
    SFT_SPLIT,
    SFTRow,
    episode_config,
    sft_rows,
    write_sft_parquet,
)
from seal.trainer.sft_settings import LOSS_WEIGHTINGS, UNTRAINED_TOKEN_HANDLINGS, SFTSettings, sft_settings

DATASET_PATH = "pkg://seal.trainer.sft.dataset"
DATASET_CLASSES = {"token": "PretokenizedSFTDataset", "row": "RowMeanSFTDataset"}
"""`sft.loss_weighting` -> the class of seal.trainer.sft.dataset that `data.custom_cls.name` names."""
SOURCE_SUFFIX = ".source.json"
"""Beside the data file: what it was built from (model, episodes, overrides); another source rebuilds it."""
HF_FOLDER = "huggingface"
TRACKER = "latest_checkpointed_iteration.txt"
START_FOLDER = "start_model"
"""Under the run folder: the model with its untrained added tokens initialised or split, when it has any."""


def validate_sft(config: DictConfig) -> SFTSettings:
    """The `sft:` settings and verl's own typed config objects (model, engine, optimiser, checkpoint) of an
    SFT experiment; ExperimentError with one line when something is wrong. Names in `data.custom_cls.name`
    the dataset class that `sft.loss_weighting` chooses."""
    from verl.utils.config import omega_conf_to_dataclass

    try:
        settings = sft_settings(config)
    except (ValueError, OmegaConfBaseException) as exc:
        raise ExperimentError(f"sft: {' '.join(str(exc).split())}") from exc
    model = config.model.path
    if model is None or not (Path(model) / "config.json").is_file():
        raise ExperimentError(f"model.path: {model} is not a model folder (-- model.path=DIR)")
    if config.data.custom_cls.path != DATASET_PATH or config.data.pad_mode != "no_padding":
        raise ExperimentError(
            f"data: SEAL's SFT rows need data.custom_cls.path={DATASET_PATH} and data.pad_mode=no_padding"
        )
    chosen = DATASET_CLASSES[settings.loss_weighting]
    if config.data.custom_cls.name not in (DATASET_CLASSES["token"], chosen):
        raise ExperimentError(
            f"data.custom_cls.name={config.data.custom_cls.name}: the class that reads SEAL's SFT rows "
            f"follows sft.loss_weighting ({' or '.join(LOSS_WEIGHTINGS)}); set that instead"
        )
    config.data.custom_cls.name = chosen
    trainer = config.trainer
    if trainer.nnodes != 1:
        raise ExperimentError(
            f"trainer.nnodes={trainer.nnodes}: allowed: 1 (the launcher runs SFT on one node, under "
            "torchrun --standalone)"
        )
    if config.data.train_batch_size % trainer.n_gpus_per_node:
        raise ExperimentError("data.train_batch_size must be a multiple of trainer.n_gpus_per_node")
    try:
        for key in ("model", "engine", "optim", "checkpoint"):
            omega_conf_to_dataclass(config[key])
    except Exception as exc:
        raise ExperimentError(f"verl rejects the config: {' '.join(str(exc).split())}") from exc
    return settings


def episodes_of(config: DictConfig, settings: SFTSettings) -> list[DictConfig]:
    """The RL experiments the rows replay (`sft.episodes`, then `sft.extra_episodes`), with the SFT model's
    tokenizer."""
    return [
        episode_config(conf, config.model.path, settings.episode_overrides) for conf in settings.all_episodes
    ]


def replayed_rows(
    config: DictConfig, settings: SFTSettings, tasks: Sequence[str] | None = None
) -> list[SFTRow]:
    """Each train task's ground-truth rollout (all, or `tasks`) under every replayed experiment in turn."""
    return [row for episodes in episodes_of(config, settings) for row in sft_rows(episodes, tasks)]


@dataclass(frozen=True)
class PreflightRow:
    task_id: str
    tokens: int
    trained: int
    reward: float


def preflight_sft(config: DictConfig, settings: SFTSettings) -> list[PreflightRow]:
    """One train task per category played with the ground truth: the rows are buildable, and their lengths
    can be read against `data.max_length`."""
    first = [next(t for t in split_ids(SFT_SPLIT) if t.rsplit("_", 1)[0] == c) for c in CATEGORIES]
    rows = replayed_rows(config, settings, first)
    return [PreflightRow(r.task_id, len(r.input_ids), sum(r.loss_mask), r.reward) for r in rows]


def source_of(config: DictConfig, settings: SFTSettings) -> dict[str, object]:
    return {
        "model": str(config.model.path),
        "episodes": settings.episodes,
        "extra_episodes": list(settings.extra_episodes),
        "episode_overrides": list(settings.episode_overrides),
    }


def ensure_sft_data(config: DictConfig, settings: SFTSettings) -> bool:
    """Build `data.train_files` unless it is there and was built from the same source; True when built."""
    path = Path(config.data.train_files)
    source = Path(f"{path}{SOURCE_SUFFIX}")
    wanted = source_of(config, settings)
    if path.is_file() and source.is_file() and json.loads(source.read_text()) == wanted:
        return False
    write_sft_parquet(replayed_rows(config, settings), path)
    source.write_text(json.dumps(wanted, indent=1) + "\n")
    return True


def sft_plan_rows(
    config: DictConfig, settings: SFTSettings, attention: AttentionChoice
) -> list[tuple[str, str, str]]:
    """(what, value, config keys) of an SFT run, for `seal.trainer.launch.plan.format_plan`; `attention` is
    the kernel the launch resolved."""
    data, trainer, model = config.data, config.trainer, config.model
    replayed = [
        f"{Path(conf).name}: tool prompt {episodes.seal.rollout.protocol}, Ω preset "
        f"{episodes.seal.interface.preset}, prompt / response {episodes.data.max_prompt_length} / "
        f"{episodes.data.max_response_length}"
        for conf, episodes in zip(settings.all_episodes, episodes_of(config, settings), strict=True)
    ]
    steps = len(settings.all_episodes) * len(split_ids(SFT_SPLIT)) // data.train_batch_size
    return [
        ("base model", str(model.path), "model.path"),
        ("method", "SFT (behaviour cloning of the train split's ground truth)", "exp/sft_warmstart.yaml"),
        ("episodes replayed", "; ".join(replayed), "sft.episodes, sft.extra_episodes, sft.episode_overrides"),
        ("data", str(data.train_files), "data.train_files (built when missing)"),
        (
            "max length",
            f"{data.max_length}, truncation {data.truncation}",
            "data.max_length, data.truncation",
        ),
        ("learning rate", f"{config.optim.lr:g}", "optim.lr"),
        (
            "loss",
            "token mean over the batch (verl's)"
            if settings.loss_weighting == "token"
            else "each row's token mean, averaged over the batch's rows",
            "sft.loss_weighting",
        ),
        (
            "untrained added tokens",
            UNTRAINED_TOKEN_HANDLINGS[settings.untrained_tokens],
            "sft.untrained_tokens",
        ),
        ("batch size", str(data.train_batch_size), "data.train_batch_size"),
        ("micro-batch size per GPU", str(data.micro_batch_size_per_gpu), "data.micro_batch_size_per_gpu"),
        (
            "epochs",
            f"{trainer.total_epochs} (at most {steps} steps per epoch)"
            + (f", ending at step {trainer.total_training_steps}" if trainer.total_training_steps else ""),
            "trainer.total_epochs, trainer.total_training_steps",
        ),
        ("GPUs", f"{trainer.n_gpus_per_node} (torchrun, one node)", "trainer.n_gpus_per_node"),
        (
            "attention",
            f"{attention.kernel} ({attention.reason}), remove padding {model.use_remove_padding}",
            "sft.attention -> model.override_config.attn_implementation, use_remove_padding, external_lib",
        ),
        (
            "checkpoints",
            f"{', '.join(config.checkpoint.save_contents)}; every {trainer.save_freq}",
            "checkpoint.save_contents, trainer.save_freq",
        ),
        ("run folder", str(Path(trainer.default_local_dir).parent), "trainer.default_local_dir/.."),
    ]


def torchrun_command(config: DictConfig, config_file: Path) -> list[str]:
    """verl's SFT entry point under torchrun, reading the recorded config `config_file`."""
    run_dir = Path(config.trainer.default_local_dir).parent
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes=1",
        f"--nproc_per_node={config.trainer.n_gpus_per_node}",
        "-m",
        "verl.trainer.sft_trainer",
        f"--config-path={config_file.parent.absolute()}",
        f"--config-name={config_file.stem}",
        f"hydra.run.dir={run_dir / 'hydra'}",
    ]


def start_model(config: DictConfig, run_dir: Path, handling: str) -> None:
    """Point `model.path` at the folder SFT starts from: the model itself, or its copy under `run_dir` whose
    untrained added tokens are initialised or split (`sft.untrained_tokens`)."""
    from seal.trainer.sft.untrained_tokens import prepared_model

    source = Path(config.model.path).absolute()
    folder, tokens = prepared_model(source, run_dir / START_FOLDER, handling)
    for token in tokens:
        pieces = " ".join(token.pieces)
        if handling == "initialise":
            done = f"its rows start as the mean of {pieces}"
        elif token.special:
            done = "left as it is (a special token, which the data's text never writes)"
        else:
            done = f"the tokenizer writes it as {pieces}"
        print(f"model  {token.token} (id {token.token_id}) was never trained: {done}")
    if folder != source:
        config.model.path = str(folder)
        print(f"model  SFT starts from {folder}")


class SFTRunError(RuntimeError):
    """verl's SFT run failed or left no model folder; the message is one line."""


def train_sft(config: DictConfig, config_file: Path, metrics: Path | None) -> None:
    """Run verl's SFT trainer on the recorded config; SFTRunError when it fails."""
    paths = [str(PROJECT_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    if metrics is not None:
        env["VERL_FILE_LOGGER_PATH"] = str(metrics.absolute())
    done = subprocess.run(torchrun_command(config, config_file), env=env, check=False)
    if done.returncode != 0:
        raise SFTRunError(f"verl's SFT trainer exited with status {done.returncode}")


def sft_model_path(config: DictConfig) -> Path:
    """The Hugging Face folder of the run's latest checkpoint; SFTRunError when there is none."""
    checkpoints = Path(config.trainer.default_local_dir)
    tracker = checkpoints / TRACKER
    if not tracker.is_file():
        raise SFTRunError(f"{checkpoints}: no checkpoint ({TRACKER} is missing)")
    folder = checkpoints / f"global_step_{tracker.read_text().strip()}" / HF_FOLDER
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        raise SFTRunError(f"{folder}: no Hugging Face model (is hf_model in checkpoint.save_contents?)")
    return folder
