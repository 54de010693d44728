"""Per-episode tool instances and safe dispatch of validated calls.

Each episode owns one instance of every involved BFCL class, loaded from the task's initial
config, and nothing is stored in module globals. A call reaches a method only through
`getattr(instance, name)` for a public method name that the caller has already checked against
the tools available now; its arguments are the parsed JSON object, passed as keyword arguments.
Results are rendered exactly as bfcl-eval's executor renders them.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from dataclasses import dataclass
from typing import Any

from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES

from seal.bfcl import isolation
from seal.bfcl.calls import ToolCall
from seal.bfcl.tasks import Task

isolation.close_leaks()


@dataclass(frozen=True)
class ExecutionResult:
    """The text BFCL would show for a call, and the error text when the call failed."""

    text: str
    error: str | None = None


def render_result(value: Any) -> str:
    """bfcl-eval's rendering: str as is, dict as JSON (str() if not serialisable), anything else str()."""
    if type(value) is str:
        return value
    if type(value) is dict:
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


def tool_error(value: Any) -> str | None:
    """The tool's own error report (`{"error": ...}`), if it returned one."""
    if isinstance(value, dict) and "error" in value:
        return str(value["error"])
    return None


def create_instance(class_name: str, task: Task) -> Any:
    """A fresh instance of a BFCL class, loaded the way bfcl-eval's executor loads it."""
    module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
    instance = getattr(module, class_name)()
    if class_name not in STATELESS_CLASSES:
        config = copy.deepcopy(task.initial_config.get(class_name, {}))
        instance._load_scenario(config, long_context=task.long_context)
    return instance


def public_methods(instance: Any) -> list[str]:
    return [name for name, _ in inspect.getmembers(instance, inspect.ismethod) if not name.startswith("_")]


class Executor:
    """The tool instances of one episode."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.instances = {name: create_instance(name, task) for name in task.involved_classes}
        self._owner = {
            method: instance for instance in self.instances.values() for method in public_methods(instance)
        }

    def has_tool(self, name: str) -> bool:
        return name in self._owner

    def execute(self, call: ToolCall) -> ExecutionResult:
        """Run one call on this episode's instances; any exception becomes BFCL's error text."""
        if call.name not in self._owner:
            message = f"Error during execution: name '{call.name}' is not defined"
            return ExecutionResult(message, message)
        method = getattr(self._owner[call.name], call.name)
        try:
            value = method(**copy.deepcopy(call.arguments))
        except Exception as exc:
            message = f"Error during execution: {exc}"
            return ExecutionResult(message, message)
        return ExecutionResult(render_result(value), tool_error(value))
