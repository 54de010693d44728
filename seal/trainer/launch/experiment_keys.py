"""The keys an experiment file sets, checked as a command-line override's key is
(seal/trainer/launch/override_keys.py).

Hydra merges an experiment file into verl's config without asking whether anything reads its keys: a
misspelt `tset_freq: 5` under `trainer:` in an exp/*.yaml composed silently, while `trainer.tset_freq=5`
on the command line was refused. Every key that the experiment file, and each experiment file it composes
(SEAL_3B composes SEAL), sets must be a key of the base config it starts from (`seal_trainer` or
`seal_sft`, composed alone), or one something reads there: an entry of a map verl passes on as it is, or
a field of the dataclass a verl section is built into. A top-level variable that the chain interpolates
(`seed: 1` read as `${seed}` by exp/learn_seal.yaml) is read by those interpolations.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seal.trainer.launch.override_keys import key_problem

BASE_CONFIGS = ("seal_trainer", "seal_sft")
"""SEAL's base configs (seal/config), which experiments compose and which are not experiments."""
NOT_SETTINGS = ("defaults", "hydra")
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][\w.]*)\}")


class ExperimentKeyError(ValueError):
    """An experiment file sets a key nothing reads; the message is one line naming the file and key."""


def check_experiment_keys(conf: Path) -> None:
    """ExperimentKeyError for the first key of `conf` (or of an experiment file it composes) that
    nothing reads. `conf` has composed already, so every file in its chain is valid YAML."""
    chain = list(experiment_chain(Path(conf).resolve()))
    bases = [name for _, node in chain for name in _defaults(node) if name in BASE_CONFIGS]
    if not bases:
        return
    base = base_config(bases[0])
    variables = {name for _, node in chain for name in interpolated(node)}
    for path, node in chain:
        for key in settings_keys(node):
            if key in variables and "." not in key:
                continue
            problem = key_problem(base, key)
            if problem is not None:
                raise ExperimentKeyError(f"{path.name}: {key}: {problem}")


def experiment_chain(conf: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """`conf` and the experiment files beside it that its defaults list composes, each with its content."""
    node = OmegaConf.to_container(OmegaConf.load(conf), resolve=False)
    yield conf, node
    for name in _defaults(node):
        parent = conf.parent / f"{name}.yaml"
        if name not in BASE_CONFIGS and parent.is_file() and parent != conf:
            yield from experiment_chain(parent)


def interpolated(node: Any) -> Iterator[str]:
    """The keys a file's values interpolate (`${seed}` -> `seed`)."""
    if isinstance(node, dict):
        for value in node.values():
            yield from interpolated(value)
    elif isinstance(node, list):
        for value in node:
            yield from interpolated(value)
    elif isinstance(node, str):
        yield from INTERPOLATION.findall(node)


def _defaults(node: dict[str, Any]) -> list[str]:
    return [entry for entry in node.get("defaults") or [] if isinstance(entry, str)]


def settings_keys(node: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """The dotted keys a file sets: its leaves (an empty map counts as one), `defaults` and `hydra` aside."""
    for name, value in node.items():
        if not prefix and name in NOT_SETTINGS:
            continue
        key = f"{prefix}{name}"
        if isinstance(value, dict) and value:
            yield from settings_keys(value, f"{key}.")
        else:
            yield key


@functools.cache
def base_config(name: str) -> DictConfig:
    """SEAL's base config `name`, composed alone (once per process; callers only read it)."""
    from seal.trainer.experiment import compose_experiment

    with resources.as_file(resources.files("seal.config").joinpath(f"{name}.yaml")) as path:
        return compose_experiment(path)
