"""Refuse overrides of keys that nothing reads, and answer a misspelt key with the key it resembles.

Hydra refuses `trainer.tset_freq=5` (no such key) and suggests `+trainer.tset_freq=5`, which it then
accepts: the run starts with `test_freq` unchanged and the new key read by nobody. A launch therefore
checks every override's key against the experiment composed without overrides. A key the config has is
fine. A new key (`+key`, `++key`) is accepted only where something reads it:
- inside a map verl passes on as it is (`actor_rollout_ref.model.override_config`, `engine_kwargs`, ...:
  the maps verl's yaml leaves empty, and Ray's `ray_kwargs.ray_init`), or a dict setting of `seal:`
  (`seal.apatch.rho`);
- as a field of the dataclass a verl section is built into (its `_target_`) that the yaml leaves out.
`seal:` is `SealSettings` (seal/trainer/settings.py), whose fields are all in the composed config.
An override without a key (`=5`) is refused, and so is a deletion (`~key`) of a key something reads:
only an entry of a map that reads any key may be deleted. `key_problem` says the same of a key an
experiment file sets (seal/trainer/launch/experiment_keys.py).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from importlib import resources
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

RAY_OPEN_MAPS = (
    "ray_kwargs.ray_init",
    "ray_kwargs.ray_init.runtime_env",
    "ray_kwargs.ray_init.runtime_env.env_vars",
)
"""Passed to `ray.init(**ray_init)`: any keyword of Ray's is read, not only the ones verl's yaml lists, and
every process of the run gets any variable of `env_vars`."""
CONFIG_PACKAGE = "seal.config"
"""Where SEAL's config groups live; verl's are in `VERL_CONFIG_DIR` (`actor=...` picks a file of a group,
not a key)."""
SEAL_SECTION = "seal"
ABSENT = object()
CLOSE_ENOUGH = 0.6
"""difflib ratio from which a known key (one part of a dotted key) is offered as the one meant."""


class OverrideKeyError(ValueError):
    """An override of a key that nothing reads; the message is one line."""


def check_override_keys(defaults: DictConfig, overrides: Sequence[str]) -> None:
    """Raise OverrideKeyError for the first override whose key `defaults` (the experiment composed
    without overrides) lacks, unless it adds (`+`) a key to a map or dataclass that reads it."""
    for override in parsed_overrides(overrides, OverrideKeyError):
        _check(defaults, override)


def parsed_overrides(overrides: Sequence[str], error: type[Exception]) -> list[Override]:
    """Hydra's parse of the overrides; a malformed one raises `error` with Hydra's message on one line."""
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as exc:
        raise error(" ".join(str(exc).split())) from exc


def _check(defaults: DictConfig, override: Override) -> None:
    key = override.key_or_group
    line = override.input_line or key
    if not key:
        raise OverrideKeyError(f"{line}: an override needs a key (key=value)")
    if override.is_hydra_override() or "/" in key or "@" in key or _is_group(key):
        return
    current = _select(defaults, key)
    if current is not ABSENT:
        if override.is_delete() and _open_map(defaults, key) is None:
            instead = f"{key}=null" if current is None else f"{key}=..."
            raise OverrideKeyError(
                f"{line}: verl or SEAL reads {key}, which cannot be deleted; set {instead}"
            )
        return
    problem = key_problem(defaults, key)
    if problem is not None:
        raise OverrideKeyError(f"{line}: {problem}")
    if not (override.is_add() or override.is_force_add() or override.is_delete()):
        raise OverrideKeyError(f"{line}: the config has no {key} yet; add it with +{line}")


def key_problem(defaults: DictConfig, key: str) -> str | None:
    """Why nothing would read `key` were it added to `defaults`, with the key it resembles; None when
    `defaults` has it, or something reads it (an entry of an open map, a field of a section's dataclass)."""
    if _select(defaults, key) is not ABSENT:
        return None
    parent, _, leaf = key.rpartition(".")
    if _open_map(defaults, key) is None and leaf not in _dataclass_fields(defaults, parent):
        return f"{_nobody_reads(key)}{_did_you_mean(defaults, key)}"
    return None


def _nobody_reads(key: str) -> str:
    where = "SealSettings" if key.startswith(SEAL_SECTION + ".") else "verl's config or the experiment"
    return f"nothing reads {key} (not a setting of {where})"


def _did_you_mean(defaults: DictConfig, key: str) -> str:
    guess = _closest_key(defaults, key)
    return f"; did you mean `{guess}`?" if guess else ""


def _closest_key(defaults: DictConfig, key: str) -> str | None:
    """The known key that `key` most likely misspells, correcting each unknown part of it among the
    keys (and dataclass fields) beside it; None when nothing is close."""
    corrected = _correct(OmegaConf.to_container(defaults, resolve=False), key.split("."))
    return ".".join(corrected) if corrected else None


def _correct(node: dict[str, Any], parts: list[str]) -> list[str] | None:
    head, rest = parts[0], parts[1:]
    names = [str(name) for name in node]
    if not rest:
        names += sorted(_fields_of(node.get("_target_")) - set(names))
    options = [head] if head in names else difflib.get_close_matches(head, names, n=3, cutoff=CLOSE_ENOUGH)
    for option in options:
        if not rest:
            return [option]
        child = node.get(option)
        tail = _correct(child, rest) if isinstance(child, dict) else None
        if tail is not None:
            return [option, *tail]
    return None


def _open_map(defaults: DictConfig, key: str) -> str | None:
    """The map that `key` would be added to when that map reads any key, else None."""
    parts = key.split(".")
    for end in range(len(parts) - 1, 0, -1):
        path = ".".join(parts[:end])
        node = _select(defaults, path)
        if not isinstance(node, DictConfig):
            continue
        if path in RAY_OPEN_MAPS or _is_open(node, path):
            return path
        return None
    return None


def _is_open(node: DictConfig, path: str) -> bool:
    """A dict setting of SealSettings; in verl's sections, a map its yaml leaves empty (`{}`)."""
    if path.startswith(SEAL_SECTION + "."):
        return OmegaConf.get_type(node) is dict
    return len(node) == 0


def _dataclass_fields(defaults: DictConfig, parent: str) -> set[str]:
    """The fields of the dataclass that verl builds the section at `parent` into (its `_target_`)."""
    return _field_names(section_dataclass(defaults, parent) if parent else None)


def _fields_of(target: object) -> set[str]:
    return _field_names(target_dataclass(target))


def _field_names(cls: type | None) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)} if cls is not None else set()


def section_dataclass(defaults: DictConfig, section: str) -> type | None:
    """The dataclass verl builds the section at `section` into (its `_target_`), or None."""
    node = _select(defaults, section)
    return target_dataclass(node.get("_target_") if isinstance(node, DictConfig) else None)


def target_dataclass(target: object) -> type | None:
    """The dataclass a `_target_` names; None without one, or where it does not import."""
    if not isinstance(target, str):
        return None
    from hydra.utils import get_class

    try:
        cls = get_class(target)
    except (ImportError, HydraException, ValueError):
        return None
    return cls if dataclasses.is_dataclass(cls) else None


def _select(config: DictConfig, key: str) -> object:
    return OmegaConf.select(config, key, default=ABSENT, throw_on_resolution_failure=False)


def _is_group(key: str) -> bool:
    """`actor=...` selects a file of a config group; Hydra checks those itself."""
    if "." in key:
        return False
    from seal.trainer.experiment import VERL_CONFIG_DIR

    return (VERL_CONFIG_DIR / key).is_dir() or resources.files(CONFIG_PACKAGE).joinpath(key).is_dir()
