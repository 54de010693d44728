"""`qwen_fc`: Qwen's `<tool_call>` JSON format, the paper's `bfcl_qwen_fc` and SEAL's default.

The system prompt is byte-identical to the tools block of bfcl-eval's QwenFCHandler (raw BFCL docs,
one `json.dumps` per line), and tool results render exactly as that handler and Qwen3's chat
template render consecutive tool messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import ClassVar

from seal.bfcl.calls import ToolCall
from seal.protocol.base import (
    CallCandidate,
    ParsedAction,
    Protocol,
    candidate_from_json,
    decode_json,
    user_message,
)

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
PROMPT_HEAD = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
PROMPT_TAIL = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
NO_VALID_BLOCK = "Found tool_call tag text, but no valid <tool_call>{...}</tool_call> block."
STRAY_TAG = (
    "Found tool_call tag text outside the valid <tool_call>{...}</tool_call> blocks (unclosed or stray tag)."
)

_SPACE = re.compile(r"\s*")
_BLOCK_END = re.compile(r"\}\s*" + re.escape(CLOSE_TAG))


def _has_tag_text(text: str) -> bool:
    return "<tool_call" in text or CLOSE_TAG in text


def find_blocks(text: str) -> list[tuple[int, int, str]]:
    """`(start, end, json_text)` of each block, as the reference's
    `re.finditer(r"<tool_call>\\s*\\n?({.*?})\\s*\\n?</tool_call>", text, re.DOTALL)` finds them.

    That regex takes quadratic time on text with many unclosed tags; this scan gives the same
    matches in linear time: a block is an open tag, whitespace, `{`, then everything up to the first
    `}` that is followed by whitespace and a close tag.
    """
    blocks: list[tuple[int, int, str]] = []
    end_match: re.Match[str] | None = None
    pos = 0
    while (start := text.find(OPEN_TAG, pos)) >= 0:
        brace = _SPACE.match(text, start + len(OPEN_TAG)).end()
        if not text.startswith("{", brace):
            pos = start + 1
            continue
        if end_match is None or end_match.start() <= brace:
            end_match = _BLOCK_END.search(text, brace + 1)
            if end_match is None:
                break
        blocks.append((start, end_match.end(), text[brace : end_match.start() + 1]))
        pos = end_match.end()
    return blocks


class QwenFCProtocol(Protocol):
    """Calls in `<tool_call>` JSON blocks, results in `<tool_response>` blocks.

    The blocks are read as the released code reads them: tag text outside the valid blocks (a stray
    `</tool_call>`, an opening tag with no JSON after it) is dropped with the rest of the text around
    them, and the blocks' calls go on to the episode's checks.
    """

    name = "qwen_fc"
    rejects_stray_tags: ClassVar[bool] = False

    def system_prompt(self, functions: Sequence[dict], extra: str = "") -> str:
        docs = "\n".join(json.dumps(doc) for doc in functions)
        return self.with_extra(PROMPT_HEAD + docs + PROMPT_TAIL, extra)

    def parse(self, text: str) -> ParsedAction:
        if not _has_tag_text(text):
            return ParsedAction()
        blocks = find_blocks(text)
        if not blocks:
            return ParsedAction(errors=(NO_VALID_BLOCK,), has_markup=True)
        calls: list[CallCandidate] = []
        errors: list[str] = []
        outside: list[str] = []
        pos = 0
        for start, end, payload in blocks:
            outside.append(text[pos:start])
            pos = end
            value, error = decode_json(payload)
            found = error if error is not None else candidate_from_json(value, ("arguments",))
            if isinstance(found, CallCandidate):
                calls.append(found)
            else:
                errors.append(found)
        outside.append(text[pos:])
        if self.rejects_stray_tags and _has_tag_text("".join(outside)):
            errors.append(STRAY_TAG)
        return ParsedAction(calls=tuple(calls), errors=tuple(errors), has_markup=True)

    def observation(self, results: Sequence[str]) -> list[dict]:
        """One user message of `<tool_response>\\n{result}\\n</tool_response>` blocks joined by "\\n",
        with no trailing newline: byte-identical to how BFCL's QwenFCHandler and Qwen3's chat template
        render consecutive tool results, and recognised by both as a tool-response turn."""
        return [user_message("\n".join(f"<tool_response>\n{result}\n</tool_response>" for result in results))]

    def format_calls(self, calls: Sequence[ToolCall]) -> str:
        """One block per call, joined by "\\n". A `</` inside a string argument is written `<\\/` (the
        same JSON string) so that argument text can never close the block early."""
        return "\n".join(f"{OPEN_TAG}\n{self._call_json(call)}\n{CLOSE_TAG}" for call in calls)

    @staticmethod
    def _call_json(call: ToolCall) -> str:
        return json.dumps({"name": call.name, "arguments": call.arguments}).replace("</", "<\\/")


class QwenFCStrictTagsProtocol(QwenFCProtocol):
    """`qwen_fc` where tag text outside the valid blocks is a format error, so strict parsing rejects the
    whole message. This project's rule until 2026-12-06; the Qwen2.5-Coder-1.5B recipe
    (exp/learn_qwen_seal.yaml) keeps it, so that its later runs read the environment its earlier ones
    were measured in."""

    name = "qwen_fc_strict_tags"
    rejects_stray_tags = True
