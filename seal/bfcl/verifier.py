"""BFCL's official multi-turn checker and the per-turn checks behind the diagnosis.

Both re-execute calls with bfcl-eval's own executor on fresh, identifier-safe namespaces that are
deleted afterwards. Only call strings built by `ToolCall.to_call_string` reach bfcl-eval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
    multi_turn_checker,
    response_checker,
    state_checker,
)
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

from seal.bfcl import isolation
from seal.bfcl.bounded_text import bounded_text
from seal.bfcl.calls import ToolCall
from seal.bfcl.checks import TurnCheck
from seal.bfcl.tasks import Task

ModelTurns = Sequence[Sequence[Sequence[ToolCall]]]
"""[turn][step][call]: the accepted calls of each assistant message, grouped by user turn."""

FORCE_TERMINATED = "multi_turn:force_terminated"


@dataclass(frozen=True)
class Verdict:
    valid: bool
    error_type: str | None = None
    error_message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "error_type": self.error_type, "error_message": self.error_message}


def _entry(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "initial_config": task.initial_config,
        "involved_classes": list(task.involved_classes),
    }


def _decoded(model_turns: ModelTurns) -> list[list[list[str]]]:
    """Steps without accepted calls are dropped, as BFCL's runner drops steps that decode to nothing."""
    return [[[call.to_call_string() for call in step] for step in turn if step] for turn in model_turns]


def official_verdict(task: Task, model_turns: ModelTurns) -> Verdict:
    """BFCL's multi-turn verdict; fewer turns than the ground truth is BFCL's force-terminated 0."""
    if len(model_turns) != task.num_turns:
        return Verdict(
            False, FORCE_TERMINATED, f"model answered {len(model_turns)} of {task.num_turns} turns"
        )
    namespace = isolation.fresh_namespace("check")
    try:
        result = multi_turn_checker(
            _decoded(model_turns),
            [list(t) for t in task.ground_truth],
            _entry(task),
            task.category,
            namespace,
        )
    finally:
        isolation.drop_namespace(namespace)
    if result.get("valid"):
        return Verdict(True)
    return Verdict(False, result.get("error_type"), result.get("error_message"))


def _execute(calls: list[str], task: Task, namespace: str) -> tuple[list[str], dict[str, Any]]:
    return execute_multi_turn_func_call(
        calls,
        task.initial_config,
        list(task.involved_classes),
        namespace,
        task.id,
        long_context=task.long_context,
        is_evaL_run=True,
    )


def _short(details: Any, limit: int = 300) -> str:
    """At most `limit` characters of `details`, cut while it is rendered (seal/bfcl/bounded_text.py)."""
    return bounded_text(details, limit)


def _check_turn(
    index: int,
    model_calls: list[str],
    gt_calls: list[str],
    task: Task,
    names: tuple[str, str],
    history: list[str],
) -> TurnCheck:
    model_ns, gt_ns = names
    try:
        model_results, model_instances = _execute(model_calls, task, model_ns)
    except Exception as exc:
        detail = f"model calls crashed the executor: {type(exc).__name__}: {exc}"
        return TurnCheck(model_calls=len(model_calls), instance_match=False, detail=detail)
    history.extend(model_results)
    try:
        gt_results, gt_instances = _execute(gt_calls, task, gt_ns)
    except Exception as exc:
        return TurnCheck(model_calls=len(model_calls), gt_error=f"{type(exc).__name__}: {exc}")
    try:
        if not gt_calls:
            return TurnCheck(model_calls=len(model_calls))
        if not gt_instances or set(model_instances) != set(gt_instances):
            return TurnCheck(
                model_calls=len(model_calls), instance_match=False, detail="instance sets differ"
            )
        state = state_checker(model_instances, gt_instances)
        response = response_checker(history, gt_results, index)
    except Exception as exc:
        return TurnCheck(model_calls=len(model_calls), checker_error=f"{type(exc).__name__}: {exc}")
    detail = ""
    if not state["valid"]:
        detail = f"state differs: {_short(state['details'].get('differences'))}"
    elif not response["valid"]:
        detail = f"missing results: {_short(response['details'].get('missing_items'))}"
    return TurnCheck(
        model_calls=len(model_calls),
        state_ok=bool(state["valid"]),
        response_ok=bool(response["valid"]),
        detail=detail,
    )


def turn_checks(task: Task, model_turns: ModelTurns) -> list[TurnCheck]:
    """One check per ground-truth turn, without stopping at the first failure.

    The model's accepted calls and the ground truth run turn by turn on two fresh namespaces, so
    each turn is judged on the state the model's own earlier calls produced. Turns the model
    never reached count as turns without calls.
    """
    names = (isolation.fresh_namespace("diag"), isolation.fresh_namespace("diag_gt"))
    history: list[str] = []
    checks = []
    try:
        for index, gt_turn in enumerate(task.ground_truth):
            steps = model_turns[index] if index < len(model_turns) else []
            calls = [call.to_call_string() for step in steps for call in step]
            checks.append(_check_turn(index, calls, list(gt_turn), task, names, history))
    finally:
        for name in names:
            isolation.drop_namespace(name)
    return checks
