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
from seal.bfcl.call_deadline import DEFAULT_CALL_S, OUT_OF_PROCESS_CLASS, CallStopped, call_deadline
from seal.bfcl.calls import ToolCall
from seal.bfcl.state_size import FileSystemGuard, TreeSize
from seal.bfcl.tasks import Task

isolation.close_leaks()


@dataclass(frozen=True)
class ExecutionResult:
    """The text BFCL would show for a call, and the error text when the call failed."""

    text: str
    error: str | None = None
    undone: str | None = None
    """Why the call was rolled back (it would have grown the state past its cap) or stopped (it ran past its
    deadline: seal/bfcl/call_deadline.py); then it did not happen."""


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
    """The tool instances of one episode; its file system, if any, kept within `max_state` (paths,
    characters: seal/bfcl/state_size.py)."""

    def __init__(
        self, task: Task, max_state: tuple[int, int] | None = None, max_call_s: float = DEFAULT_CALL_S
    ) -> None:
        self.task = task
        self.max_call_s = max_call_s
        self.instances = {name: create_instance(name, task) for name in task.involved_classes}
        self._owner = {
            method: instance for instance in self.instances.values() for method in public_methods(instance)
        }
        fs = self.instances.get("GorillaFileSystem")
        self._guard = FileSystemGuard(fs, *max_state) if fs is not None and max_state else None

    def state_size(self) -> TreeSize | None:
        """The file system's size as last measured (None without a file system or a cap)."""
        return None if self._guard is None else self._guard.size

    @property
    def calls_out_of_process(self) -> bool:
        """Some of its calls run in worker processes, up to their deadline (seal/bfcl/call_deadline.py):
        a thread waiting for them leaves the interpreter to others."""
        return OUT_OF_PROCESS_CLASS in self.instances

    def has_tool(self, name: str) -> bool:
        return name in self._owner

    def execute(self, call: ToolCall) -> ExecutionResult:
        """Run one call on this episode's instances; any exception becomes BFCL's error text."""
        if call.name not in self._owner:
            message = f"Error during execution: name '{call.name}' is not defined"
            return ExecutionResult(message, message)
        owner = self._owner[call.name]
        method = getattr(owner, call.name)
        guard = self._guard
        measured = guard is not None and owner is guard.fs and guard.changes(call.name)
        guard = guard if measured else None
        snapshot = guard.before(call.name, len(repr(call.arguments))) if guard is not None else None
        try:
            with call_deadline(self.max_call_s):
                value = method(**copy.deepcopy(call.arguments))
        except CallStopped as exc:
            return ExecutionResult("", str(exc), undone=str(exc))
        except Exception as exc:
            value = exc
        undone = guard.after(snapshot) if guard is not None else None
        if undone is not None:
            return ExecutionResult("", undone, undone=undone)
        if isinstance(value, Exception):
            message = f"Error during execution: {value}"
            return ExecutionResult(message, message)
        try:
            return ExecutionResult(render_result(value), tool_error(value))
        except ValueError as exc:
            message = f"Error during execution: the result cannot be shown ({exc})"
            return ExecutionResult(message, message)
