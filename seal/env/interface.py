"""Ω, the training-time interface (paper Eq. 9, docs/design.md §5), and Evolve(Ω_t, C_t) → Ω_{t+1}.

Ω changes only what the model is shown while training: schema cues on the function docs (φ_schema),
recovery hints after errors (φ_err) and behavioural guidelines chosen from the failure profile C_t
(φ_cap). It never changes tools, ground truth or the verifier, and evaluation episodes use `RAW`.
An `Interface` is immutable; `evolve` returns a new one with the next version number, so every
episode can record exactly which interface it ran under.

Hints are built only from the tool's name, its doc (parameter names, declared types, listed enum
values) and the names in the error text, never from the ground truth or from tool state.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

import orjson

from seal.bfcl import schema
from seal.protocol import DEFAULT_PROTOCOL
from seal.tocf.labels import (
    ARGUMENT_MISMATCH,
    CORRECT_ABSTENTION,
    EMPTY_TURN_MODEL_RESPONSE,
    EXCLUDED,
    INSTANCE_MISMATCH,
    INVALID_TOOL_CALL,
    MISSING_TOOL_CALL,
    PASS,
    RECOVERY_FAILURE,
    RESPONSE_MISMATCH,
    SPURIOUS_TOOL_CALL,
    STATE_MISMATCH,
)
from seal.tocf.profile import FailureProfile, ProfileStats

OBSERVATION_NOTE = (
    "Observation note: parameters marked [required] must be provided exactly when calling a tool; "
    "do not invent tools outside the current schema."
)
"""Paper appendix D.2, the text the released code appends to the system prompt."""

GUIDELINE_HEADER = "# Behavioral guidelines (env-evolved from recent failures):"

GUIDELINES: Mapping[str, str] = MappingProxyType(
    {
        "Cautious-call": "[Cautious-call] If no available function clearly matches the user's request, "
        "respond in plain text rather than fabricating a tool call.",
        "Active-respond": "[Active-respond] When the user's request CAN be served by an available "
        "function, you MUST emit a tool_call rather than only replying in plain text.",
        "State-aware": "[State-aware] Before issuing a state-mutating call, re-read the most recent tool "
        "results to confirm the current state matches what the arguments assume.",
        "Scope": "[Scope] Verify that the instance/target your call refers to actually appeared in "
        "earlier tool results before calling on it.",
        "Format": "[Format] Match your final reply to the format implied by the user's request: lists, "
        "units, exact strings, ordering.",
        "Schema": "[Schema] Pass exactly the parameters a function documents: every parameter marked "
        "[required], no undocumented ones, values of the declared type and, where allowed values are "
        "listed, one of them.",
        "Call-format": "[Call-format] Write every tool call exactly in the tool-call format of the system "
        "prompt, naming only a function from the current tool list.",
        "Recover": "[Recover] When a tool returns an error, fix its cause (an argument, a name, or a "
        "missing earlier step) and retry before moving on or answering.",
    }
)
"""The five lines of paper appendix D.4 (as the released code has them), then three lines for the paper
taxonomy's labels, which the released code never produced. Key order is the order shown in the prompt."""

LABEL_GUIDELINE: Mapping[str, str] = MappingProxyType(
    {
        SPURIOUS_TOOL_CALL: "Cautious-call",
        EMPTY_TURN_MODEL_RESPONSE: "Active-respond",
        MISSING_TOOL_CALL: "Active-respond",
        STATE_MISMATCH: "State-aware",
        INSTANCE_MISMATCH: "Scope",
        RESPONSE_MISMATCH: "Format",
        ARGUMENT_MISMATCH: "Schema",
        INVALID_TOOL_CALL: "Call-format",
        RECOVERY_FAILURE: "Recover",
    }
)
"""Failure label → guideline; the first five follow the released code's defaults."""

NOT_FAILURES: frozenset[str] = EXCLUDED | {PASS, CORRECT_ABSTENTION, "unknown"}
"""Labels left out of the guideline prevalence denominator, as in the released code."""

_QWEN_FC_REMINDER = (
    "Each tool call MUST be a JSON object inside <tool_call>...</tool_call> tags with both "
    '"name" and "arguments" keys, e.g. <tool_call>{"name": "<tool>", "arguments": {"<arg>": <value>}}'
    "</tool_call>."
)
FORMAT_REMINDERS: Mapping[str, str] = MappingProxyType(
    {
        "qwen_fc": _QWEN_FC_REMINDER,
        "qwen_fc_strict_tags": _QWEN_FC_REMINDER,
        "llama3_json": 'Each tool call MUST be one JSON object with a "name" key and a "parameters" object, '
        'e.g. {"name": "<tool>", "parameters": {"<arg>": <value>}}.',
        "python_list": "Tool calls MUST be one Python-style list of calls with keyword arguments, "
        "e.g. [tool_a(arg=value), tool_b(arg=value)].",
    }
)
MAX_TOOL_NAMES = 12


@dataclass(frozen=True)
class InterfaceConfig:
    """Per-component switches and the φ_cap selection thresholds.

    A guideline enters when its labels occur at least `min_count` times, with prevalence at least
    `min_prevalence + hysteresis` and mean reward below `max_reward - hysteresis`; an active one stays
    while its prevalence is at least `min_prevalence - hysteresis` and its mean reward below
    `max_reward + hysteresis`. Among those, the top `max_lines` by pressure are kept, an active one
    counting `hysteresis` more pressure, so a challenger must clearly beat it to take its place.
    """

    schema_required: bool
    schema_type: bool
    schema_enum: bool
    note: bool
    error_hints: bool
    guidelines: bool
    min_count: int = 8
    min_prevalence: float = 0.10
    max_reward: float = 0.6
    max_lines: int = 3
    hysteresis: float = 0.02

    def __post_init__(self) -> None:
        for name in ("schema_required", "schema_type", "schema_enum", "note", "error_hints", "guidelines"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"interface config {name} must be a boolean, got {getattr(self, name)!r}")
        for name in ("min_count", "max_lines"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"interface config {name} must be a non-negative integer, got {value!r}")
        for name, high in (("min_prevalence", 1.0), ("max_reward", 1.0), ("hysteresis", 0.5)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= high:
                raise ValueError(f"interface config {name} must be a number in [0, {high}], got {value!r}")

    @property
    def schema_cues(self) -> bool:
        return self.schema_required or self.schema_type or self.schema_enum


PRESETS: Mapping[str, InterfaceConfig] = MappingProxyType(
    {
        "reference": InterfaceConfig(
            schema_required=True,
            schema_type=False,
            schema_enum=False,
            note=True,
            error_hints=False,
            guidelines=False,
        ),
        "full": InterfaceConfig(
            schema_required=True,
            schema_type=True,
            schema_enum=True,
            note=True,
            error_hints=True,
            guidelines=True,
        ),
        "none": InterfaceConfig(
            schema_required=False,
            schema_type=False,
            schema_enum=False,
            note=False,
            error_hints=False,
            guidelines=False,
        ),
    }
)
"""`reference`: what the released code ran (" [required]" and the note, static); `full`: all three
components, closed loop; `none`: the raw BFCL interface."""


@dataclass(frozen=True)
class Pressure:
    """What C_t says about one guideline's labels."""

    count: int
    prevalence: float
    mean_reward: float

    @property
    def pressure(self) -> float:
        return self.prevalence * (1.0 - self.mean_reward)


@dataclass(frozen=True)
class Interface:
    """One version of Ω; `guidelines` are keys of GUIDELINES, `profile` the C_t JSON it was evolved from."""

    config: InterfaceConfig
    version: int = 0
    guidelines: tuple[str, ...] = ()
    profile: dict[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 0:
            raise ValueError(f"interface version must be a non-negative integer, got {self.version!r}")
        if not isinstance(self.guidelines, tuple) or any(g not in GUIDELINES for g in self.guidelines):
            raise ValueError(f"guidelines must be a tuple of {list(GUIDELINES)}, got {self.guidelines!r}")
        if list(self.guidelines) != [g for g in GUIDELINES if g in self.guidelines]:
            raise ValueError("interface guidelines must be unique and in GUIDELINES order")
        if self.guidelines and not self.config.guidelines:
            raise ValueError("interface has guidelines although its config switches guidelines off")
        if len(self.guidelines) > self.config.max_lines:
            raise ValueError(f"{len(self.guidelines)} guidelines exceed max_lines {self.config.max_lines}")

    # -- φ_schema -----------------------------------------------------------------------------
    def present(self, docs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Deep copies of `docs` with this version's schema cues; the caller's docs are never touched.

        Function docs are JSON data, so an orjson round trip copies them: five times faster than
        `copy.deepcopy`, which was a tenth of the service's CPU per episode (every create presents
        the task's docs)."""
        presented: list[dict[str, Any]] = orjson.loads(orjson.dumps([dict(doc) for doc in docs]))
        if self.config.schema_cues:
            for doc in presented:
                self._annotate(doc)
        return presented

    def _annotate(self, doc: dict[str, Any]) -> None:
        specs = schema.parameters(doc)
        properties = (doc.get("parameters") or {}).get("properties") or {}
        for name, prop in properties.items():
            if not isinstance(prop, dict):
                continue
            description = str(prop.get("description") or "")
            spec = specs[name]
            additions = []
            if self.config.schema_required and spec.required and "[required]" not in description:
                additions.append("[required]")
            if self.config.schema_type and "type" in prop and "[type:" not in description:
                additions.append(f"[type: {prop['type']}]")
            if self.config.schema_enum and spec.enum and "Allowed values:" not in description:
                additions.append("Allowed values: " + ", ".join(spec.enum))
            if additions:
                added = " ".join(additions)
                prop["description"] = f"{description} {added}" if description else added

    def system_suffix(self) -> str:
        """Text for the end of the system prompt (the caller puts a blank line before it); "" if none."""
        parts = []
        if self.config.note:
            parts.append(OBSERVATION_NOTE)
        if self.config.guidelines and self.guidelines:
            parts.append("\n".join([GUIDELINE_HEADER, *(f"- {GUIDELINES[g]}" for g in self.guidelines)]))
        return "\n\n".join(parts)

    # -- φ_err --------------------------------------------------------------------------------
    def error_hint(
        self,
        tool: str,
        result: str,
        doc: Mapping[str, Any] | None,
        arguments: Mapping[str, Any] | None = None,
    ) -> str | None:
        """One "[Hint] ..." line for a failed call; None when hints are off or `result` is a success.

        `result` is the call's rendered result or its error text. Given the call's own `arguments`, a
        schema violation is named precisely (the tool's own error rarely says which argument was wrong).
        """
        if not self.config.error_hints:
            return None
        message = error_message(result)
        if message is None:
            return None
        return f"[Hint] {_diagnose(tool, message, doc, arguments)}"

    def parse_error_hint(
        self, errors: Sequence[str], available: Sequence[str], protocol: str = DEFAULT_PROTOCOL
    ) -> str | None:
        """Hint lines for a rejected message: the call format of `protocol` and the tools available now."""
        if not self.config.error_hints or not errors:
            return None
        reminder = FORMAT_REMINDERS.get(
            protocol, "Write each tool call exactly in the tool-call format described in the system prompt."
        )
        names = list(available)
        shown = names[:MAX_TOOL_NAMES]
        if len(names) > MAX_TOOL_NAMES:
            shown.append(f"... (+{len(names) - MAX_TOOL_NAMES} more)")
        lines = [f"[Hint] {reminder}"]
        if shown:
            lines.append(f"[Hint] Available tools: {', '.join(shown)}.")
        lines.append(
            "[Hint] If no available tool can serve the user's request, reply in plain text "
            "instead of producing a malformed tool call."
        )
        return "\n".join(lines)

    # -- serialisation ------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "config": asdict(self.config),
            "guidelines": list(self.guidelines),
            "profile": copy.deepcopy(self.profile),
            "system_suffix": self.system_suffix(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Interface:
        """Inverse of `to_json` (`system_suffix` is derived and ignored); ValueError when malformed."""
        if not isinstance(data, Mapping):
            raise ValueError("interface must be a JSON object")
        unknown = sorted(set(data) - {"version", "config", "guidelines", "profile", "system_suffix"})
        if unknown:
            raise ValueError(f"interface has unknown key(s) {unknown}")
        for key in ("version", "config"):
            if key not in data:
                raise ValueError(f"interface: missing key {key!r}")
        guidelines = data.get("guidelines", [])
        if not isinstance(guidelines, list):
            raise ValueError("interface guidelines must be a list")
        profile = data.get("profile")
        return cls(
            config=_config(data["config"]),
            version=data["version"],
            guidelines=tuple(guidelines),
            profile=None if profile is None else FailureProfile.from_json(profile).to_json(),
        )


def _config(data: Any, base: Mapping[str, Any] | None = None) -> InterfaceConfig:
    if not isinstance(data, Mapping):
        raise ValueError("interface config must be a JSON object")
    known = [f.name for f in fields(InterfaceConfig)]
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"unknown interface config key(s) {unknown}; expected some of {known}")
    merged = {**(base or {}), **data}
    missing = [f.name for f in fields(InterfaceConfig) if f.name not in merged and f.default is MISSING]
    if missing:
        raise ValueError(f"interface config is missing key(s) {missing}")
    return InterfaceConfig(**merged)


DEFAULT_PRESET = "reference"
"""What the released SEAL code ran: the required-parameter hint and the note, static."""


def build_interface(preset: str = DEFAULT_PRESET, **overrides: Any) -> Interface:
    """Version 0 of a preset, with any config field overridden."""
    if preset not in PRESETS:
        raise ValueError(f"unknown interface preset {preset!r}; expected one of {', '.join(PRESETS)}")
    return Interface(_config(overrides, asdict(PRESETS[preset])))


RAW = build_interface("none")
"""The untouched BFCL interface: what every eval-mode episode uses."""


# -- Evolve ----------------------------------------------------------------------------------
_ROUNDING = 1e-9
"""So that a prevalence of exactly min_prevalence + hysteresis (e.g. 12/100) counts as reaching it."""


def pressures(stats: ProfileStats) -> dict[str, Pressure]:
    """Count, prevalence and mean reward of each guideline's labels in one scope of C_t.

    Prevalence = occurrences / occurrences of all failure labels (neither pass, correct_abstention
    nor excluded); labels sharing a guideline (missing_tool_call, empty_turn_model_response) add up.
    """
    denominator = sum(n for label, n in stats.labels.items() if label not in NOT_FAILURES)
    counts: dict[str, int] = {}
    rewards: dict[str, float] = {}
    for label, n in stats.labels.items():
        key = LABEL_GUIDELINE.get(label)
        if key is None or n == 0:
            continue
        counts[key] = counts.get(key, 0) + n
        rewards[key] = rewards.get(key, 0.0) + stats.reward_sum.get(label, 0.0)
    return {
        key: Pressure(count=n, prevalence=n / denominator, mean_reward=min(1.0, max(0.0, rewards[key] / n)))
        for key, n in counts.items()
    }


def select_guidelines(
    evidence: Mapping[str, Pressure], active: Sequence[str], config: InterfaceConfig
) -> tuple[str, ...]:
    """The guidelines to show next, by the enter/stay rule of InterfaceConfig, in GUIDELINES order."""
    h = config.hysteresis
    ranked = []
    for key, p in evidence.items():
        held = key in active
        prevalence_floor = config.min_prevalence - h if held else config.min_prevalence + h
        reward_ceiling = config.max_reward + h if held else config.max_reward - h
        enough = p.count >= config.min_count and p.prevalence >= prevalence_floor - _ROUNDING
        if enough and p.mean_reward < reward_ceiling:
            ranked.append((-(p.pressure + (h if held else 0.0)), list(GUIDELINES).index(key), key))
    chosen = {key for _, _, key in sorted(ranked)[: config.max_lines]}
    return tuple(key for key in GUIDELINES if key in chosen)


def evolve(current: Interface, profile: Mapping[str, Any], version: int | None = None) -> Interface:
    """Evolve(Ω_t, C_t): the next version, with guidelines re-selected from the profile's window
    (its total when the window holds no labels). With guidelines off it only records the profile.

    `version` numbers the result explicitly instead of `current.version + 1`: a resumed run restores
    its saved Ω at the saved version, so the versions its episodes record continue without a gap."""
    parsed = FailureProfile.from_json(profile)
    recorded = parsed.to_json()
    guidelines: tuple[str, ...] = ()
    if current.config.guidelines:
        stats = parsed.window if any(parsed.window.labels.values()) else parsed.total
        guidelines = select_guidelines(pressures(stats), current.guidelines, current.config)
    number = current.version + 1 if version is None else version
    return replace(current, version=number, guidelines=guidelines, profile=recorded)


# -- φ_err diagnosis ---------------------------------------------------------------------------
_EXECUTION_PREFIX = "Error during execution:"
_MISSING = re.compile(r"missing \d+ required (?:positional |keyword-only )?arguments?: (.+)", re.IGNORECASE)
_UNEXPECTED = re.compile(r"unexpected keyword argument '([^']+)'", re.IGNORECASE)
_UNKNOWN_TOOL = re.compile(
    r"name '[^']*' is not defined|is not available|tool not found|no such tool", re.IGNORECASE
)
_FORMAT = re.compile(r"invalid tool call|json|expecting value|unterminated string", re.IGNORECASE)
_NO_SUCH_PATH = re.compile(r"no such file|no such directory", re.IGNORECASE)
_PATH_RULE = re.compile(r"path not allowed|cannot use path|single component|invalid character", re.IGNORECASE)
_AUTH = re.compile(
    r"not authenticated|logged in|log in|access token|token expired|token not initialized", re.IGNORECASE
)
_TYPE = re.compile(
    r"not supported between instances|unsupported operand|can only concatenate|is not iterable"
    r"|object has no attribute|must be (?:str|int|float|real number|a number|numbers)|not subscriptable"
    r"|indices must be|has no len\(\)|requires string as left operand|can't multiply sequence"
    r"|could not convert|invalid literal for|must be numbers|must be a number",
    re.IGNORECASE,
)
_INVALID_VALUE = re.compile(r"\binvalid\b|must be one of|options are", re.IGNORECASE)


def error_message(result: str) -> str | None:
    """The error a call's result reports: BFCL's `Error during execution: X`, a tool's own
    `{"error": X}`, or the text itself; None for a rendered success (a JSON object without "error")."""
    text = (result or "").strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return str(value["error"]) if "error" in value else None
    if text.startswith(_EXECUTION_PREFIX):
        return text[len(_EXECUTION_PREFIX) :].strip()
    return text


def _describe(spec: schema.ParamSpec | None, name: str) -> str:
    if spec is None:
        return f"'{name}'"
    allowed = f", one of: {', '.join(spec.enum)}" if spec.enum else ""
    return f"'{name}' ({spec.type}{allowed})"


def _diagnose(
    tool: str, message: str, doc: Mapping[str, Any] | None, arguments: Mapping[str, Any] | None
) -> str:
    """Most specific first: an unknown tool, the call's own schema violations, Python's argument and
    type errors, the tools' own path and login errors, then a generic recovery nudge."""
    specs = schema.parameters(doc) if doc else {}
    if _UNKNOWN_TOOL.search(message):
        return f"`{tool}` is not a tool available now; call only functions from the current tool list."
    accepted = f"its parameters are {', '.join(specs)}" if specs else "it takes no parameters"
    if doc is not None and arguments is not None and (broken := schema.violations(doc, arguments)):
        unknown = any(line.startswith("Unknown parameter") for line in broken)
        tail = f" ({accepted})" if unknown else ""
        return f"`{tool}` call breaks its schema: {' '.join(broken)} Fix the arguments{tail} and retry."
    if missing := _MISSING.search(message):
        names = re.findall(r"'([^']+)'", missing.group(1))
        described = ", ".join(_describe(specs.get(n), n) for n in names)
        return (
            f"`{tool}` is missing required parameter(s) {described}; "
            "provide every parameter marked [required]."
        )
    if unexpected := _UNEXPECTED.search(message):
        return f"`{tool}` has no parameter '{unexpected.group(1)}'; {accepted}."
    if _TYPE.search(message):
        declared = ", ".join(f"{name} ({spec.type})" for name, spec in specs.items())
        where = f": {declared}" if declared else ""
        return f"`{tool}` got an argument of the wrong type; match every value to its declared type{where}."
    if _NO_SUCH_PATH.search(message):
        return (
            f"`{tool}` named a file or directory that does not exist where you are; list the current "
            "directory and use a name exactly as listed."
        )
    if _PATH_RULE.search(message):
        return f"`{tool}` accepts only a plain name in the current directory, not a path; move step by step."
    if _AUTH.search(message):
        return (
            f"`{tool}` needs an authenticated session; log in with this API's login or "
            "authentication function, then use exactly what it returns."
        )
    if _FORMAT.search(message):
        return f"the call to `{tool}` could not be read; send its arguments as one JSON object."
    enums = [spec for spec in specs.values() if spec.enum]
    if enums and _INVALID_VALUE.search(message):
        listed = "; ".join(f"{spec.name}: {', '.join(spec.enum)}" for spec in enums)
        return f"`{tool}` rejected a value; use only the allowed values ({listed})."
    return (
        f"`{tool}` reported an error; correct the argument it points to, or make the call it depends on, "
        "then retry."
    )
