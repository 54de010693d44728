"""What a BFCL function doc says about its parameters, and which of those constraints a call breaks.

BFCL does not validate arguments before executing a call, so the episode checks them here to record
`argument_mismatch` evidence, and the interface reads the same facts to write its cues. BFCL
multi-turn docs carry enums only as text inside descriptions, in three forms:
`[Enum]: ["on", "off"]` (a JSON list), `[Enum]: USD, RMB` (a bare comma list) and
`Options are: economy, business, first.` / `Here are the options: read_write, read, write`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_ENUM_MARKER = re.compile(r"(?:\[Enum\]|Options are|Here are the options)\s*:\s*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


@dataclass(frozen=True)
class ParamSpec:
    """One top-level parameter of a function doc."""

    name: str
    type: str
    required: bool
    enum: tuple[str, ...] | None
    description: str


def parse_enum(description: str) -> tuple[str, ...] | None:
    """The allowed values written in a description, or None when it lists none."""
    marker = _ENUM_MARKER.search(description)
    if marker is None:
        return None
    body = description[marker.end() :].strip()
    if body.startswith("["):
        try:
            values, _ = json.JSONDecoder().raw_decode(body)
        except json.JSONDecodeError:
            return None
        if not isinstance(values, list) or not values:
            return None
        return tuple(str(value) for value in values)
    body = _SENTENCE_END.split(body, maxsplit=1)[0]
    values = tuple(part.strip() for part in body.split(",") if part.strip())
    return values or None


def _declared_enum(spec: Mapping[str, Any], description: str) -> tuple[str, ...] | None:
    listed = spec.get("enum")
    if isinstance(listed, list) and listed:
        return tuple(str(value) for value in listed)
    return parse_enum(description)


def parameters(doc: Mapping[str, Any]) -> dict[str, ParamSpec]:
    """The doc's top-level parameters in declaration order."""
    schema = doc.get("parameters") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    specs: dict[str, ParamSpec] = {}
    for name, spec in properties.items():
        spec = spec if isinstance(spec, Mapping) else {}
        description = str(spec.get("description") or "")
        specs[name] = ParamSpec(
            name=name,
            type=str(spec.get("type") or "any"),
            required=name in required,
            enum=_declared_enum(spec, description),
            description=description,
        )
    return specs


def json_type(value: Any) -> str:
    """The BFCL type name of a JSON value (`null` for None)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, Mapping):
        return "dict"
    return type(value).__name__


_FITS: dict[str, frozenset[str]] = {
    "string": frozenset({"string"}),
    "integer": frozenset({"integer"}),
    "float": frozenset({"float", "integer"}),
    "boolean": frozenset({"boolean"}),
    "array": frozenset({"array"}),
    "dict": frozenset({"dict"}),
}


def fits(declared: str, value: Any) -> bool:
    """Whether a value fits a declared BFCL type; `any` and unknown type names accept everything."""
    allowed = _FITS.get(declared)
    return allowed is None or json_type(value) in allowed


def _enum_violation(spec: ParamSpec, value: Any) -> str | None:
    if spec.enum is None:
        return None
    items = value if isinstance(value, list | tuple) else [value]
    if all(isinstance(item, str) and item in spec.enum for item in items):
        return None
    return f"Parameter '{spec.name}' must be one of: {', '.join(spec.enum)}."


def violations(doc: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """One short sentence per broken constraint: parameter names, declared types and enum values only."""
    specs = parameters(doc)
    found = [
        f"Required parameter '{spec.name}' is missing."
        for spec in specs.values()
        if spec.required and spec.name not in arguments
    ]
    for name, value in arguments.items():
        spec = specs.get(name)
        if spec is None:
            found.append(f"Unknown parameter '{name}'.")
        elif not fits(spec.type, value):
            found.append(f"Parameter '{name}' must be of type {spec.type}, not {json_type(value)}.")
        elif (problem := _enum_violation(spec, value)) is not None:
            found.append(problem)
    return found
