"""`llama3_json`: Llama-3.1-style JSON tool calling, `{"name": ..., "parameters": {...}}` as the whole reply.

The instructions follow the Llama 3.1 model card's JSON-based tool calling, as bfcl-eval's
LlamaHandler_3_1 writes them, plus one sentence on calling several functions and one on answering
in plain text, which the episode needs to know when a turn ends.

A reply is read as both references read it, bfcl-eval's LlamaHandler_3_1 decoder (Python syntax
through `eval`) and the released code's `llama31_official_fc` parser (JSON, then Python literals,
`<|python_tag|>` and a Markdown fence dropped, the name under `name` or `function`, and tag text a
format error in its strict mode, which it trains with): JSON values, or where JSON fails Python
literals read by `ast.literal_eval`, so no model text is ever evaluated.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence

from seal.bfcl.calls import ToolCall
from seal.protocol.base import (
    CallCandidate,
    ParsedAction,
    Protocol,
    candidate_from_json,
    json_error,
    unfence,
    user_message,
)

PYTHON_TAG = "<|python_tag|>"
ARGUMENT_KEYS = ("parameters", "arguments")
TAG_TEXT = ("<tool_call", "</tool_call>")
TAG_ERROR = "Reply with raw JSON calls, not <tool_call> tags"
INSTRUCTIONS = (
    "Given the following functions, please respond with a JSON for a function call with its proper "
    "arguments that best answers the given prompt.\n\n"
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}. '
    "Do not use variables. To call several functions, write one such JSON object per line. "
    "When no function call is needed, answer in plain text."
)
RESULTS_HEADER = "Results of your function calls, in call order:"

_decoder = json.JSONDecoder()


def _decode_values(text: str) -> tuple[list, str | None]:
    """The JSON values of `text`, separated by whitespace or `;`, and the first decode error."""
    values: list = []
    pos = 0
    while True:
        while pos < len(text) and (text[pos].isspace() or text[pos] == ";"):
            pos += 1
        if pos == len(text):
            return values, None
        try:
            value, pos = _decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            return values, json_error(exc)
        values.append(value)


def _python_literals(text: str) -> list | None:
    """The Python literals of `text`, one expression statement each (lines or `;` between them), or
    None where any statement is not a literal: `{'name': 'ls', 'parameters': {}}`, which bfcl-eval's
    decoder and the released code run."""
    try:
        statements = ast.parse(text).body
        if not all(isinstance(statement, ast.Expr) for statement in statements):
            return None
        return [ast.literal_eval(statement.value) for statement in statements]
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None


def _named(payload: object) -> object:
    """A call object naming its function under `function` alone, as the released code accepts, with
    that name under `name`."""
    if isinstance(payload, dict) and "name" not in payload and "function" in payload:
        return {**payload, "name": payload["function"]}
    return payload


class Llama3JsonProtocol(Protocol):
    """The reply is one call object, a list of them, or several separated by newlines, `;` or `,`."""

    name = "llama3_json"

    def system_prompt(self, functions: Sequence[dict], extra: str = "") -> str:
        docs = "\n\n".join(json.dumps(doc, indent=4) for doc in functions)
        return self.with_extra(f"{INSTRUCTIONS}\n\n{docs}", extra)

    def parse(self, text: str) -> ParsedAction:
        text = unfence(text.replace(PYTHON_TAG, ""))
        if any(tag in text for tag in TAG_TEXT):
            return ParsedAction(errors=(TAG_ERROR,), has_markup=True)
        if not text.startswith(("{", "[")):
            return ParsedAction()
        values, error = _decode_values(text)
        if error is not None:
            literals = _python_literals(text)
            if literals is not None:
                values, error = literals, None
        payloads = [
            item for value in values for item in (value if isinstance(value, list | tuple) else [value])
        ]
        calls: list[CallCandidate] = []
        errors: list[str] = []
        for payload in payloads:
            found = candidate_from_json(_named(payload), ARGUMENT_KEYS)
            if isinstance(found, CallCandidate):
                calls.append(found)
            else:
                errors.append(found)
        if error is not None:
            errors.append(error)
        return ParsedAction(calls=tuple(calls), errors=tuple(errors), has_markup=bool(calls or errors))

    def observation(self, results: Sequence[str]) -> list[dict]:
        """One user message: a header, then `[i] result` per line, numbered from 1 in call order."""
        lines = [RESULTS_HEADER, *(f"[{i}] {result}" for i, result in enumerate(results, 1))]
        return [user_message("\n".join(lines))]

    def format_calls(self, calls: Sequence[ToolCall]) -> str:
        """One `{"name", "parameters"}` object per line."""
        return "\n".join(json.dumps({"name": call.name, "parameters": call.arguments}) for call in calls)
