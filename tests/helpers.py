"""Shared test helpers: ground-truth action logs in any protocol."""

from __future__ import annotations

from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.protocol import get_protocol

END_OF_TURN = "Done."


def ground_truth_actions(task_id: str, fmt: str = "qwen_fc") -> list[str]:
    """One message with a turn's calls (if any), then plain text to end the turn."""
    protocol = get_protocol(fmt)
    actions = []
    for calls in ground_truth_calls(get_task(task_id)):
        if calls:
            actions.append(protocol.format_calls(calls))
        actions.append(END_OF_TURN)
    return actions
