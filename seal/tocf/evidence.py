"""What an episode records per ground-truth turn: the input of the diagnosis Ψ.

Plain frozen data so that the environment can build it while an episode runs, ship it as JSON
(`to_dict` / `from_dict`) and the diagnosis can stay a pure function of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import UnionType
from typing import Any


def _opt_str(value: Any, field: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{field} must be a string or null, got {type(value).__name__}")


def _mapping(data: Any, owner: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{owner} must be a JSON object, got {type(data).__name__}")
    return data


def _req(data: Mapping[str, Any], key: str, kind: type | UnionType, owner: str) -> Any:
    if key not in data:
        raise ValueError(f"{owner}: missing key {key!r}")
    value = data[key]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise ValueError(f"{owner}.{key} has the wrong type {type(value).__name__}")
    return value


@dataclass(frozen=True)
class CallEvidence:
    """One attempted tool call, accepted (executed) or rejected before execution."""

    message: int
    name: str
    accepted: bool
    reject_reason: str | None = None
    error: str | None = None
    schema_violations: tuple[str, ...] = ()

    @property
    def errored(self) -> bool:
        """True when the call executed and the tool reported an error."""
        return self.accepted and self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "name": self.name,
            "accepted": self.accepted,
            "reject_reason": self.reject_reason,
            "error": self.error,
            "schema_violations": list(self.schema_violations),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CallEvidence:
        data = _mapping(data, "CallEvidence")
        message = _req(data, "message", int, "CallEvidence")
        name = _req(data, "name", str, "CallEvidence")
        accepted = _req(data, "accepted", bool, "CallEvidence")
        reject_reason = _opt_str(data.get("reject_reason"), "CallEvidence.reject_reason")
        error = _opt_str(data.get("error"), "CallEvidence.error")
        violations = data.get("schema_violations", [])
        if not isinstance(violations, list | tuple) or not all(isinstance(v, str) for v in violations):
            raise ValueError("CallEvidence.schema_violations must be a list of strings")
        return cls(message, name, accepted, reject_reason, error, tuple(violations))


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
        data = _mapping(data, "TurnCheck")
        detail = data.get("detail", "")
        if not isinstance(detail, str):
            raise ValueError("TurnCheck.detail must be a string")
        flags = {}
        for key in ("instance_match", "state_ok", "response_ok"):
            flags[key] = data.get(key, True)
            if not isinstance(flags[key], bool):
                raise ValueError(f"TurnCheck.{key} must be bool")
        return cls(
            model_calls=_req(data, "model_calls", int, "TurnCheck"),
            gt_error=_opt_str(data.get("gt_error"), "TurnCheck.gt_error"),
            checker_error=_opt_str(data.get("checker_error"), "TurnCheck.checker_error"),
            detail=detail,
            **flags,
        )


@dataclass(frozen=True)
class TurnEvidence:
    """Everything recorded about one ground-truth turn: messages, attempts and the verifier's check."""

    turn: int
    gt_empty: bool
    reached: bool
    messages: tuple[int, ...]
    calls: tuple[CallEvidence, ...]
    rejected_messages: int
    check: TurnCheck

    @property
    def accepted_calls(self) -> tuple[CallEvidence, ...]:
        return tuple(c for c in self.calls if c.accepted)

    @property
    def rejected_calls(self) -> tuple[CallEvidence, ...]:
        return tuple(c for c in self.calls if not c.accepted)

    @property
    def has_accepted_call(self) -> bool:
        """A call executed in this turn, per the verifier's count or the recorded attempts."""
        return self.check.model_calls > 0 or any(c.accepted for c in self.calls)

    @property
    def has_rejected_attempt(self) -> bool:
        """Something was rejected: a parsed call, or a whole message whose calls could not be parsed."""
        return self.rejected_messages > 0 or any(not c.accepted for c in self.calls)

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "gt_empty": self.gt_empty,
            "reached": self.reached,
            "messages": list(self.messages),
            "calls": [c.to_dict() for c in self.calls],
            "rejected_messages": self.rejected_messages,
            "check": self.check.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnEvidence:
        data = _mapping(data, "TurnEvidence")
        turn = _req(data, "turn", int, "TurnEvidence")
        gt_empty = _req(data, "gt_empty", bool, "TurnEvidence")
        reached = _req(data, "reached", bool, "TurnEvidence")
        messages = _req(data, "messages", list | tuple, "TurnEvidence")
        if not all(isinstance(m, int) and not isinstance(m, bool) for m in messages):
            raise ValueError("TurnEvidence.messages must be a list of integers")
        calls = tuple(CallEvidence.from_dict(c) for c in _req(data, "calls", list | tuple, "TurnEvidence"))
        rejected_messages = _req(data, "rejected_messages", int, "TurnEvidence")
        check = TurnCheck.from_dict(_req(data, "check", Mapping, "TurnEvidence"))
        return cls(turn, gt_empty, reached, tuple(messages), calls, rejected_messages, check)
