"""`llama3_json`: Llama-3.1-style JSON tool calling, `{"name": ..., "parameters": {...}}` as the whole reply.

The instructions follow the Llama 3.1 model card's JSON-based tool calling, as bfcl-eval's
LlamaHandler_3_1 writes them, plus one sentence on calling several functions and one on answering
in plain text, which the episode needs to know when a turn ends.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from seal.bfcl.calls import ToolCall
from seal.protocol.base import (
    CallCandidate,
    ParsedAction,
    Protocol,
    candidate_from_json,
    json_error,
    user_message,
)

PYTHON_TAG = "<|python_tag|>"
ARGUMENT_KEYS = ("parameters", "arguments")
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


class Llama3JsonProtocol(Protocol):
    """The reply is one call object, a JSON list of them, or several separated by newlines or `;`."""

    name = "llama3_json"

    def system_prompt(self, functions: Sequence[dict], extra: str = "") -> str:
        docs = "\n\n".join(json.dumps(doc, indent=4) for doc in functions)
        return self.with_extra(f"{INSTRUCTIONS}\n\n{docs}", extra)

    def parse(self, text: str) -> ParsedAction:
        text = text.strip()
        text = text.removeprefix(PYTHON_TAG).lstrip()
        if not text.startswith(("{", "[")):
            return ParsedAction()
        values, error = _decode_values(text)
        payloads = [item for value in values for item in (value if isinstance(value, list) else [value])]
        calls: list[CallCandidate] = []
        errors: list[str] = []
        for payload in payloads:
            found = candidate_from_json(payload, ARGUMENT_KEYS)
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
