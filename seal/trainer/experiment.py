"""Experiment configs: compose an exp/*.yaml with overrides, check it, train it (GPUs only for `train`).

    cfg = compose_experiment(Path("exp/SEAL.yaml"), ["trainer.total_epochs=1"])
    check_values(cfg)            # the `seal:` section's and the launch rules' checks: no verl import
    validate_experiment(cfg)     # those, then verl's validate_config
    train(cfg)                   # what verl's main() does, with SealTaskRunner

Relative data paths in a config are relative to the project root; relative output folders
(checkpoints, validation dumps) to the current directory. `resolve_paths` makes all of them absolute,
so Ray workers and later test-split evaluations agree on them whatever their working directory.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seal.bfcl.tasks import SPLITS
from seal.dataset import DATA_DIR, parquet_bytes
from seal.trainer.rl import AGENT_LOOPS
from seal.trainer.settings import SealSettings, settings_from_config
from seal.trainer.sft_settings import is_sft

PROJECT_ROOT = DATA_DIR.parent
VERL_CONFIG_DIR = Path(importlib.util.find_spec("verl").submodule_search_locations[0]) / "trainer" / "config"
"""verl's packaged configs, found without importing verl (`pkg://verl.trainer.config` imports the package,
and with it torch: seconds before a misspelt override could be refused)."""
SEARCHPATH_OVERRIDE = f"hydra.searchpath=[pkg://seal.config,file://{VERL_CONFIG_DIR}]"
"""Where `seal_trainer`, `seal_sft` and verl's `ppo_trainer` and `sft_trainer_engine` are found. Hydra
reads a search path only from the primary config or the command line, and experiment files compose one
another (SEAL_3B on SEAL), so it is given here, once, instead of in every file."""


class ExperimentError(ValueError):
    """A config that cannot be composed or does not pass validation; the message is one line."""


def compose_experiment(conf: Path | str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose `conf` (an experiment yaml) with Hydra `overrides` into a resolved, path-complete config."""
    conf = Path(conf).resolve()
    if not conf.is_file() or conf.suffix != ".yaml":
        raise ExperimentError(f"no experiment file {conf} (expected an exp/*.yaml)")
    try:
        with initialize_config_dir(config_dir=str(conf.parent), version_base=None):
            config = compose(config_name=conf.stem, overrides=[SEARCHPATH_OVERRIDE, *overrides])
        resolve_paths(config)
    except (HydraException, OmegaConfBaseException, yaml.YAMLError) as exc:
        raise ExperimentError(f"{conf.name}: {_one_line(exc)}") from exc
    return config


def resolve_paths(config: DictConfig) -> None:
    """Make data files, output folders and the agent-loop config path absolute, in place. An SFT
    experiment's data file is built into its run folder, so it is an output folder's path."""
    trainer = config.trainer
    for key in ("default_local_dir", "validation_data_dir"):
        if trainer.get(key) is not None:
            trainer[key] = str(Path(trainer[key]).expanduser().absolute())
    data = config.data
    if is_sft(config):
        data.train_files = str(Path(data.train_files).expanduser().absolute())
        config.sft.episodes = _project_path(config.sft.episodes)
        if config.sft.get("extra_episodes"):
            config.sft.extra_episodes = _project_path(config.sft.extra_episodes)
        return
    for key in ("train_files", "val_files"):
        data[key] = _project_path(data[key])
    agent = config.actor_rollout_ref.rollout.agent
    if agent.agent_loop_config_path is None:
        agent.agent_loop_config_path = str(AGENT_LOOPS)


def _project_path(value: str | ListConfig) -> str | list[str]:
    if isinstance(value, ListConfig | list):
        return [_project_path(item) for item in value]
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else PROJECT_ROOT / path)


def check_values(config: DictConfig) -> SealSettings:
    """The `seal:` section's checks and the launch rules' `config` rows (seal/trainer/launch/rules.py), which
    read the composed values only: no verl, Ray or torch is imported, so a wrong value is refused at once.
    Return the settings; ExperimentError if wrong."""
    from seal.trainer.launch.rules import LaunchCheckError, check_launch_config

    try:
        settings = settings_from_config(config)
    except (ValueError, OmegaConfBaseException) as exc:
        raise ExperimentError(f"seal: {_one_line(exc)}") from exc
    try:
        check_launch_config(config, settings)
    except LaunchCheckError as exc:
        raise ExperimentError(str(exc)) from exc
    return settings


def validate_experiment(config: DictConfig, check_data: bool = True) -> SealSettings:
    """Run `check_values` and verl's `validate_config` (its batch checks whatever the micro-batching); return
    the settings. ExperimentError if wrong."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from seal.trainer.launch.checks import check_verl_batches
    from seal.trainer.launch.vllm_absent import for_verl_checks

    settings = check_values(config)
    roles = {"use_reference_policy": need_reference_policy(config), "use_critic": need_critic(config)}
    checkable = for_verl_checks(config)
    try:
        validate_config(config=checkable, **roles)
    except (AssertionError, ValueError, OmegaConfBaseException, HydraException) as exc:
        raise ExperimentError(f"verl rejects the config: {_one_line(exc)}") from exc
    try:
        check_verl_batches(checkable, **roles)
    except (AssertionError, ValueError, OmegaConfBaseException, HydraException) as exc:
        raise ExperimentError(
            f"verl rejects the config (its batch checks, which it skips under packed micro-batches): "
            f"{_one_line(exc)}"
        ) from exc
    if check_data:
        for key in ("train_files", "val_files"):
            for path in _as_list(config.data[key]):
                if not Path(path).is_file():
                    raise ExperimentError(f"data.{key}: {path} is missing (run scripts/prepare_data.py)")
    return settings


def ensure_data(config: DictConfig) -> list[Path]:
    """Build the project's parquet files that `config` names and that are missing; return those written.
    Each is written beside its place and renamed into it, so launches that start at once on one shared disk
    never read a half-written file."""
    named = {str(path) for key in ("train_files", "val_files") for path in _as_list(config.data[key])}
    written = []
    for split in SPLITS:
        path = DATA_DIR / f"bfcl_{split}.parquet"
        if str(path) in named and not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
            partial.write_bytes(parquet_bytes(split))
            os.replace(partial, path)
            written.append(path)
    return written


def train(config: DictConfig) -> None:
    """verl's `main()` for SEAL, on a config the launch has resolved (`seal.attention` included): set the
    device, build missing data, validate, run PPO (SealTaskRunner), stopped if Ray kills actors for memory."""
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.device import auto_set_device

    from seal.trainer.rl.oom_watch import stop_on_memory_kills
    from seal.trainer.rl.task_runner import SealTaskRunner

    auto_set_device(config)
    ensure_data(config)
    validate_experiment(config)
    with stop_on_memory_kills():
        run_ppo(config, task_runner_class=SealTaskRunner)


def to_yaml(config: DictConfig) -> str:
    """The resolved config as YAML (what the launcher records)."""
    return OmegaConf.to_yaml(config, resolve=True)


def _as_list(files: str | ListConfig | list[str]) -> list[str]:
    return [files] if isinstance(files, str) else list(files)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
