"""The protocol interface: how tools, tool calls and tool results look as model-facing text.

A protocol only translates. It reports what the assistant text says (unvalidated candidates and
format errors) and leaves every decision (strictness, tool availability, `ToolCall` validation,
execution) to the episode.

Every message a protocol produces has role "user", so any OpenAI-compatible chat endpoint accepts
the conversation without tool-role support or tool-call ids.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from seal.bfcl.calls import ToolCall
from seal.protocol.representable import first_surrogate, is_unicode, value_problem

ERROR_PREFIX = "[ERROR] Invalid tool call format: "
_LANGUAGE_TAG = re.compile(r"[A-Za-z][\w+-]*[ \t]*\n")


@dataclass(frozen=True)
class CallCandidate:
    """One call as the text states it: `name` may be anything and `arguments` any decoded value."""

    name: Any
    arguments: Any


@dataclass(frozen=True)
class ParsedAction:
    """What one assistant message says.

    `has_markup` is False for a plain-text answer, which ends the user turn. When it is True and
    `errors` is empty, `calls` is non-empty: a message that calls nothing (e.g. an empty call list)
    is reported as plain text, as BFCL treats an empty decode as the end of the turn.
    """

    calls: tuple[CallCandidate, ...] = ()
    errors: tuple[str, ...] = ()
    has_markup: bool = False


def user_message(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def unfence(text: str) -> str:
    """`text` without surrounding whitespace and Markdown backtick fences (with an optional language tag)."""
    text = text.strip()
    if text.startswith("`"):
        text = text.strip("`")
        tag = _LANGUAGE_TAG.match(text)
        if tag:
            text = text[tag.end() :]
    return text.strip()


def decode_json(text: str) -> tuple[Any, str | None]:
    """`(value, None)` or `(None, error)`; never raises, even on input nested past the recursion limit
    or an integer past Python's 4,300-digit limit."""
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as exc:
        return None, json_error(exc)


def json_error(exc: ValueError | RecursionError) -> str:
    """The format error of a failed JSON decode: a syntax error, nesting past the recursion limit, or
    an integer past the int-string limit (a ValueError whose advice on `sys` is no use to a model)."""
    if isinstance(exc, RecursionError):
        return "Invalid tool call JSON: nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        return f"Invalid tool call JSON: {exc}"
    return f"Invalid tool call JSON: {str(exc).split(';')[0]}"


def _label(name: Any) -> str:
    """A short, safe rendering of a name of any type for error messages."""
    return repr(name[:80]) if isinstance(name, str) else f"with a {type(name).__name__} name"


def unrepresentable(name: Any, arguments: dict[Any, Any]) -> str | None:
    """The format error of a call whose name or arguments hold a value that cannot travel exactly
    (seal/protocol/representable.py), or None."""
    if isinstance(name, str) and not is_unicode(name):
        surrogate = first_surrogate(name)
        return f"Tool name {_label(name)} holds a lone surrogate ({surrogate}), which is not Unicode text"
    for key, value in arguments.items():
        problem = value_problem(key)
        if problem is not None:
            return f"An argument name of tool call {_label(name)} {problem}"
        problem = value_problem(value)
        if problem is not None:
            return f"Argument {_label(key)} of tool call {_label(name)} {problem}"
    return None


def candidate_from_json(payload: Any, argument_keys: Sequence[str]) -> CallCandidate | str:
    """A candidate from one decoded call object, or the format error it has.

    `argument_keys` lists the accepted names of the arguments field (exactly one may be present).
    Arguments given as a JSON string are decoded, as serving stacks sometimes emit them that way.
    """
    wanted = " or ".join(repr(key) for key in argument_keys)
    if not isinstance(payload, dict):
        return f"Tool call must be a JSON object, got {type(payload).__name__}"
    present = [key for key in argument_keys if key in payload]
    if "name" not in payload or not present:
        return f"Tool call JSON must contain 'name' and {wanted}"
    if len(present) > 1:
        return f"Tool call JSON must contain only one of {wanted}"
    name, arguments = payload["name"], payload[present[0]]
    if isinstance(arguments, str):
        arguments, error = decode_json(arguments)
        if error is not None:
            return f"Arguments of tool call {_label(name)} are a string that is not valid JSON"
    if not isinstance(arguments, dict):
        kind = type(arguments).__name__
        return f"Arguments of tool call {_label(name)} must be a JSON object, got {kind}"
    return unrepresentable(name, arguments) or CallCandidate(name=name, arguments=arguments)


class Protocol(ABC):
    """One model-facing text format; instances are stateless and may be shared."""

    name: ClassVar[str]

    @abstractmethod
    def system_prompt(self, functions: Sequence[dict], extra: str = "") -> str:
        """The system prompt presenting `functions`; a non-empty `extra` is appended after a blank line."""

    @abstractmethod
    def parse(self, text: str) -> ParsedAction:
        """The call candidates and format errors of one assistant message; never raises."""

    @abstractmethod
    def observation(self, results: Sequence[str]) -> list[dict]:
        """The messages appended after an accepted assistant message, results in call order."""

    @abstractmethod
    def format_calls(self, calls: Sequence[ToolCall]) -> str:
        """Assistant text that `parse` maps back to exactly `calls` (ground-truth replay, oracles)."""

    def error_observation(self, errors: Sequence[str]) -> list[dict]:
        """The reply to a rejected message, in the reference implementation's wording."""
        return [user_message(ERROR_PREFIX + "; ".join(errors))]

    def reveal_message(self, functions: Sequence[dict]) -> str:
        """The user text of a miss_func reveal turn: the held-out docs, then BFCL's fixed question."""
        # Imported here: bfcl_eval must load after seal.bfcl (imported above) has set BFCL_PROJECT_ROOT.
        from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING

        docs = json.dumps(list(functions))
        return DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=docs)

    @staticmethod
    def with_extra(prompt: str, extra: str) -> str:
        return f"{prompt}\n\n{extra}" if extra else prompt
