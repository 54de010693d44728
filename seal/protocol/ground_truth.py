"""Ground-truth action logs: the assistant messages that replay a task's ground truth in a protocol.

One helper for the tests, the benchmarks and the scripted endpoints, so every oracle speaks alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.protocol import DEFAULT_PROTOCOL, get_protocol

END_OF_TURN = "Done."
"""Plain text without tool-call markup: it ends the user turn in every protocol."""


def actions_for_calls(turns: Sequence[Sequence[ToolCall]], protocol: str = DEFAULT_PROTOCOL) -> list[str]:
    """Per user turn: one message with the turn's calls (if any), then `END_OF_TURN`."""
    writer = get_protocol(protocol)
    actions: list[str] = []
    for calls in turns:
        if calls:
            actions.append(writer.format_calls(list(calls)))
        actions.append(END_OF_TURN)
    return actions


def ground_truth_actions(task_id: str, protocol: str = DEFAULT_PROTOCOL) -> list[str]:
    """The action log that replays `task_id`'s ground truth."""
    return actions_for_calls(ground_truth_calls(get_task(task_id)), protocol)
