"""What an episode records per ground-truth turn: the input of the diagnosis Ψ.

Plain frozen data so that the environment can build it while an episode runs, ship it as JSON
(`to_dict` / `from_dict`) and the diagnosis can stay a pure function of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from seal.bfcl.checks import TurnCheck, json_object, optional_str, required


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
        data = json_object(data, "CallEvidence")
        message = required(data, "message", int, "CallEvidence")
        name = required(data, "name", str, "CallEvidence")
        accepted = required(data, "accepted", bool, "CallEvidence")
        reject_reason = optional_str(data.get("reject_reason"), "CallEvidence.reject_reason")
        error = optional_str(data.get("error"), "CallEvidence.error")
        violations = data.get("schema_violations", [])
        if not isinstance(violations, list | tuple) or not all(isinstance(v, str) for v in violations):
            raise ValueError("CallEvidence.schema_violations must be a list of strings")
        return cls(message, name, accepted, reject_reason, error, tuple(violations))


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
        data = json_object(data, "TurnEvidence")
        turn = required(data, "turn", int, "TurnEvidence")
        gt_empty = required(data, "gt_empty", bool, "TurnEvidence")
        reached = required(data, "reached", bool, "TurnEvidence")
        messages = required(data, "messages", list | tuple, "TurnEvidence")
        if not all(isinstance(m, int) and not isinstance(m, bool) for m in messages):
            raise ValueError("TurnEvidence.messages must be a list of integers")
        calls = tuple(
            CallEvidence.from_dict(c) for c in required(data, "calls", list | tuple, "TurnEvidence")
        )
        rejected_messages = required(data, "rejected_messages", int, "TurnEvidence")
        check = TurnCheck.from_dict(required(data, "check", Mapping, "TurnEvidence"))
        return cls(turn, gt_empty, reached, tuple(messages), calls, rejected_messages, check)
