"""Ground-truth call strings as ToolCalls: parsed with `ast`, positional arguments named by signature."""

from __future__ import annotations

import ast
import importlib
import inspect
from functools import cache

from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import Task


@cache
def _signature(class_name: str, method: str) -> inspect.Signature | None:
    cls = getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name)
    function = getattr(cls, method, None)
    return inspect.signature(function) if callable(function) else None


def parse_call(source: str, classes: tuple[str, ...]) -> ToolCall:
    """`sort('final_report.pdf')` -> ToolCall('sort', {'file_name': 'final_report.pdf'})."""
    node = ast.parse(source.strip(), mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain call: {source!r}")
    name = node.func.id
    arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg is not None}
    if node.args:
        signature = next((sig for c in classes if (sig := _signature(c, name)) is not None), None)
        if signature is None:
            raise ValueError(f"cannot name the positional arguments of {source!r}")
        params = [p for p in signature.parameters.values() if p.name != "self"]
        for param, value in zip(params, node.args, strict=False):
            arguments[param.name] = ast.literal_eval(value)
    return ToolCall(name, arguments)


def ground_truth_calls(task: Task) -> list[list[ToolCall]]:
    """The task's ground truth, one list of calls per user turn."""
    return [[parse_call(call, task.involved_classes) for call in turn] for turn in task.ground_truth]
