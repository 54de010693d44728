"""Type-check command-line overrides against the values they replace.

Hydra refuses unknown keys, and the `seal:` section has a typed schema, but verl's yaml is untyped:
`trainer.test_freq=abc` composes and passes `validate_config`, then fails hours later (or never).
An override of a key whose composed value is a bool, an int or a float must therefore parse as one;
other values (strings, lists, null defaults) take what verl takes. An int default of a field that verl's
config dataclass (the section's `_target_`) declares a float takes any number: verl writes
`entropy_coeff: 0` and `top_p: 1`. Sweeps are refused: one launch is one run.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Any

from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from seal.trainer.launch.override_keys import parsed_overrides, section_dataclass

ABSENT = object()
KINDS = {bool: "a boolean (true/false)", int: "an integer", float: "a number"}


class OverrideTypeError(ValueError):
    """An override whose value does not fit the key's type; the message is one line."""


def check_override_types(defaults: DictConfig, overrides: Sequence[str]) -> None:
    """Raise OverrideTypeError for the first override whose value does not fit the default in `defaults`
    (the experiment composed without overrides)."""
    for override in parsed_overrides(overrides, OverrideTypeError):
        _check(defaults, override)


def _check(defaults: DictConfig, override: Override) -> None:
    line = override.input_line or override.key_or_group
    if override.is_sweep_override():
        raise OverrideTypeError(f"{line}: sweeps are not supported; launch one run per value")
    if override.is_delete():
        return
    value = override.value()
    default = OmegaConf.select(
        defaults, override.key_or_group, default=ABSENT, throw_on_resolution_failure=False
    )
    if value is None or default is ABSENT or (isinstance(value, str) and "${" in value):
        return
    expected = _scalar_type(default)
    # an int fits either way; verl's dataclass (an import of verl, seconds) is read only for other values
    if expected is int and type(value) is not int and _declared_float(defaults, override.key_or_group):
        expected = float
    if expected is None or _fits(value, expected):
        return
    raise OverrideTypeError(
        f"{line}: {override.key_or_group} expects {KINDS[expected]} (default {default!r}), "
        f"got {type(value).__name__} {value!r}"
    )


def _scalar_type(default: Any) -> type | None:
    """bool, int or float when the default is one; None when any value is acceptable."""
    for kind in KINDS:
        if type(default) is kind:
            return kind
    return None


def _declared_float(defaults: DictConfig, key: str) -> bool:
    """Whether the dataclass of the key's section (its `_target_`) declares the field a float."""
    section, _, field = key.rpartition(".")
    cls = section_dataclass(defaults, section) if section else None
    if cls is None:
        return False
    try:
        declared = typing.get_type_hints(cls).get(field)
    except (NameError, TypeError):  # hints that do not resolve: the int rule holds
        return False
    return declared is float or float in typing.get_args(declared)


def _fits(value: Any, expected: type) -> bool:
    if expected is float:
        return type(value) in (int, float)
    return type(value) is expected
