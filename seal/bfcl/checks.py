"""The verifier's per-turn check: the record `seal.bfcl.verifier` produces and the diagnosis reads.

It lives at the bottom of the project (seal.bfcl imports nothing else of it), so the verifier and
`seal.tocf` share one definition without the verifier depending on the diagnosis. The JSON field
helpers validate records read back from disk or the wire; `seal.tocf.evidence` uses them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any


def optional_str(value: Any, field: str) -> str | None:
    """`value` if it is a string or None; a one-line error naming `field` otherwise."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{field} must be a string or null, got {type(value).__name__}")


def json_object(data: Any, owner: str) -> Mapping[str, Any]:
    """`data` if it is a JSON object (a mapping); a one-line error naming `owner` otherwise."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{owner} must be a JSON object, got {type(data).__name__}")
    return data


def required(data: Mapping[str, Any], key: str, kind: type | UnionType, owner: str) -> Any:
    """`data[key]`, which must exist and be a `kind` (a bool is not an int)."""
    if key not in data:
        raise ValueError(f"{owner}: missing key {key!r}")
    value = data[key]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise ValueError(f"{owner}.{key} has the wrong type {type(value).__name__}")
    return value


@dataclass(frozen=True)
class TurnCheck:
    """The verifier's re-execution of this turn's accepted calls against the ground truth."""

    model_calls: int
    instance_match: bool = True
    state_ok: bool = True
    response_ok: bool = True
    gt_error: str | None = None
    checker_error: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """All three checks passed (errors of the checker itself are judged separately)."""
        return self.instance_match and self.state_ok and self.response_ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "instance_match": self.instance_match,
            "state_ok": self.state_ok,
            "response_ok": self.response_ok,
            "gt_error": self.gt_error,
            "checker_error": self.checker_error,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnCheck:
        data = json_object(data, "TurnCheck")
        detail = data.get("detail", "")
        if not isinstance(detail, str):
            raise ValueError("TurnCheck.detail must be a string")
        flags = {}
        for key in ("instance_match", "state_ok", "response_ok"):
            flags[key] = data.get(key, True)
            if not isinstance(flags[key], bool):
                raise ValueError(f"TurnCheck.{key} must be bool")
        return cls(
            model_calls=required(data, "model_calls", int, "TurnCheck"),
            gt_error=optional_str(data.get("gt_error"), "TurnCheck.gt_error"),
            checker_error=optional_str(data.get("checker_error"), "TurnCheck.checker_error"),
            detail=detail,
            **flags,
        )
