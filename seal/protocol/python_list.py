"""`python_list`: BFCL's prompting format `[f(a=1), g(b='x')]`, as used by ToolACE.

The system prompt is bfcl-eval's own default prompting prompt. The reply is parsed with `ast`
only and argument values with `ast.literal_eval`, so no model text is ever evaluated.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from seal.bfcl.calls import ToolCall
from seal.protocol.base import (
    CallCandidate,
    ParsedAction,
    Protocol,
    unfence,
    unrepresentable,
    user_message,
)


class _Source:
    """What the model wrote for a node, shortened to 80 characters: sliced from the text by the node's
    position, never rebuilt with `ast.unparse`, which recurses once per level (RecursionError on
    `x.x.x...f()` or `---...1` thousands long); the lines are encoded once (offsets count UTF-8 bytes)."""

    def __init__(self, text: str) -> None:
        self.lines = [line.encode() for line in text.splitlines(keepends=True)]

    def __call__(self, node: ast.expr) -> str:
        line = self.lines[node.lineno - 1]
        end = node.end_col_offset if node.end_lineno == node.lineno else None
        return line[node.col_offset : end][:320].decode(errors="ignore")[:80].rstrip()


def _call_candidate(node: ast.expr, source: _Source) -> CallCandidate | str:
    """The candidate for one list element, or why it is not a plain keyword-argument call."""
    if not isinstance(node, ast.Call):
        return f"List element {source(node)!r} is not a function call"
    if not isinstance(node.func, ast.Name):
        return f"Function name {source(node.func)!r} must be a plain name"
    name = node.func.id
    if node.args:
        return f"Call to {name} uses positional arguments; pass every argument as name=value"
    arguments = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            return f"Call to {name} uses ** unpacking; pass every argument as name=value"
        if keyword.arg in arguments:
            return f"Call to {name} repeats argument {keyword.arg}"
        try:
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return f"Argument {keyword.arg} of {name} is not a literal value"
    return unrepresentable(name, arguments) or CallCandidate(name=name, arguments=arguments)


class PythonListProtocol(Protocol):
    """The reply is a Python list of keyword-argument calls; anything not starting with `[` is plain text."""

    name = "python_list"

    def system_prompt(self, functions: Sequence[dict], extra: str = "") -> str:
        # Imported here: bfcl_eval must load after seal.bfcl has set BFCL_PROJECT_ROOT.
        from bfcl_eval.constants.default_prompts import DEFAULT_SYSTEM_PROMPT_FORMAT
        from bfcl_eval.model_handler.utils import formulate_system_prompt

        return self.with_extra(formulate_system_prompt(DEFAULT_SYSTEM_PROMPT_FORMAT, list(functions)), extra)

    def parse(self, text: str) -> ParsedAction:
        text = unfence(text)
        if not text.startswith("["):
            return ParsedAction()
        try:
            tree = ast.parse(text, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            error = f"Invalid function call list: {type(exc).__name__}: {exc}"
            return ParsedAction(errors=(error,), has_markup=True)
        if not isinstance(tree, ast.List):
            return ParsedAction(errors=("The reply must be one list of function calls",), has_markup=True)
        calls: list[CallCandidate] = []
        errors: list[str] = []
        source = _Source(text)
        for node in tree.elts:
            found = _call_candidate(node, source)
            if isinstance(found, CallCandidate):
                calls.append(found)
            else:
                errors.append(found)
        return ParsedAction(calls=tuple(calls), errors=tuple(errors), has_markup=bool(calls or errors))

    def observation(self, results: Sequence[str]) -> list[dict]:
        """One user message holding `repr` of the tool messages, as bfcl-eval's
        `format_execution_results_prompting` writes them, less the call-string `name` the protocol
        does not receive: `[{'role': 'tool', 'content': result}, ...]` in call order."""
        return [user_message(repr([{"role": "tool", "content": result} for result in results]))]

    def format_calls(self, calls: Sequence[ToolCall]) -> str:
        """`[f(a=1), g(b='x')]`, each call as its BFCL call string."""
        return "[" + ", ".join(call.to_call_string() for call in calls) + "]"
