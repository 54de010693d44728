"""Validated tool calls and the call strings built from them.

A model's tool call is data: a name and a JSON object of arguments. Only calls whose name and
argument names are plain identifiers, and whose values are finite JSON data of bounded size, are
turned into the `name(k=repr(v), ...)` strings that bfcl-eval's checker evaluates, so no model
text can reach `eval` except as a quoted literal.
"""

from __future__ import annotations

import keyword
import math
import re
from dataclasses import dataclass, field
from typing import Any

from bfcl_eval.model_handler.utils import convert_to_function_call

IDENTIFIER = re.compile(r"^[A-Za-z_]\w*$", re.ASCII)
MAX_DEPTH = 16
MAX_ARGUMENT_CHARS = 20_000


class InvalidCallError(ValueError):
    """A tool call that may not be executed; the message is shown to the model."""


def _check_value(value: Any, depth: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise InvalidCallError(f"argument {where} is nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidCallError(f"argument {where} is not a finite number")
        return
    if isinstance(value, list):
        for item in value:
            _check_value(item, depth + 1, where)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidCallError(f"argument {where} has a non-string key")
            _check_value(item, depth + 1, where)
        return
    raise InvalidCallError(f"argument {where} is not JSON data ({type(value).__name__})")


def is_identifier(name: object) -> bool:
    return isinstance(name, str) and bool(IDENTIFIER.match(name)) and not keyword.iskeyword(name)


@dataclass(frozen=True)
class ToolCall:
    """One call: a validated identifier and keyword arguments made of finite JSON data."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not is_identifier(self.name):
            raise InvalidCallError(f"tool name {str(self.name)[:80]!r} is not a valid identifier")
        if not isinstance(self.arguments, dict):
            raise InvalidCallError(f"arguments of {self.name} must be a JSON object")
        for key, value in self.arguments.items():
            if not is_identifier(key):
                raise InvalidCallError(
                    f"argument name {str(key)[:80]!r} of {self.name} is not a valid identifier"
                )
            _check_value(value, 1, f"{self.name}.{key}")
        if len(repr(self.arguments)) > MAX_ARGUMENT_CHARS:
            raise InvalidCallError(f"arguments of {self.name} exceed {MAX_ARGUMENT_CHARS} characters")

    def to_call_string(self) -> str:
        """The BFCL call string, e.g. `cd(folder='document')`, built by bfcl-eval's own FC converter;
        safe to hand to its executor because every part was validated above."""
        return convert_to_function_call({self.name: self.arguments})[0]
