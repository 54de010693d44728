"""One BFCL V4 agentic conversation (memory, web search) played through a SEAL protocol.

bfcl-eval has no handler for Qwen2.5, so the model is driven as in BFCL V3 evaluation: the protocol's system
prompt presents the entry's functions (with bfcl's own system text: the memory instructions, the answer
format), each reply is parsed strictly (any problem rejects the whole message with the protocol's error
text, as in docs/design.md §3.4), accepted calls run on the entry's backend instance, and a plain-text
reply ends the user turn. Calls reach the backend only through `getattr` for a public method the entry
lists, with validated JSON arguments (`seal.bfcl.calls.ToolCall`): no model text is evaluated, unlike
bfcl-eval's executor. The scored answer is the reply that ended the last turn, checked by bfcl-eval's
`agentic_checker`; a conversation a limit cut has no answer and scores 0.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from seal.bfcl.calls import InvalidCallError, ToolCall
from seal.bfcl.executor import render_result
from seal.evaluation.budget import BudgetedChat, ContextBudget
from seal.evaluation.endpoint import ChatEndpoint, EndpointError
from seal.evaluation.runner import Played
from seal.protocol import get_protocol
from seal.protocol.base import ParsedAction, Protocol

ANSWER_CHARS = 1000
"""The final answer kept in the record (the action log has it whole)."""


@dataclass(frozen=True)
class AgenticItem:
    """One bfcl-eval agentic entry: its id and category, the system text and user turns, the functions it
    shows, and the accepted answers (None for a memory prerequisite conversation, which is not scored)."""

    id: str
    category: str
    system: str
    turns: tuple[tuple[str, ...], ...]
    functions: tuple[dict[str, Any], ...]
    answers: tuple[str, ...] | None
    scenario: str | None = None


def split_question(question: list[list[dict[str, str]]]) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """bfcl's turns -> (the system messages' text, the user messages of each turn)."""
    system = "\n\n".join(m["content"] for turn in question for m in turn if m["role"] == "system")
    turns = tuple(tuple(m["content"] for m in turn if m["role"] != "system") for turn in question)
    return system, turns


@dataclass
class Conversation:
    """The transcript and outcome of one item."""

    actions: list[str] = field(default_factory=list)
    answer: str | None = None
    cut: str = "none"
    error: str | None = None


class Backend:
    """The entry's tool instance, reachable only through the public methods its functions list."""

    def __init__(self, instance: Any, functions: tuple[dict[str, Any], ...]) -> None:
        self.instance = instance
        self.names = {
            doc["name"]
            for doc in functions
            if not doc["name"].startswith("_") and callable(getattr(instance, doc["name"], None))
        }

    def validate(self, parsed: ParsedAction) -> tuple[list[ToolCall], list[str]]:
        """The calls, and the problems that reject the whole message."""
        calls: list[ToolCall] = []
        problems: list[str] = list(parsed.errors)
        for candidate in parsed.calls:
            name = candidate.name
            if not isinstance(name, str) or name not in self.names:
                problems.append(f"Tool '{str(name)[:80]}' is not available in the current tool list.")
                continue
            try:
                calls.append(ToolCall(name, candidate.arguments))
            except InvalidCallError as exc:
                problems.append(str(exc))
        return calls, problems

    def execute(self, call: ToolCall) -> str:
        """bfcl-eval's rendering of the result; an exception becomes its error text."""
        try:
            value = getattr(self.instance, call.name)(**copy.deepcopy(call.arguments))
        except Exception as exc:
            return f"Error during execution: {exc}"
        return render_result(value)


def _step(protocol: Protocol, backend: Backend, parsed: ParsedAction) -> list[dict[str, str]]:
    calls, problems = backend.validate(parsed)
    if problems:
        return protocol.error_observation(problems)
    return protocol.observation([backend.execute(call) for call in calls])


async def converse(
    endpoint: ChatEndpoint, budget: ContextBudget, item: AgenticItem, protocol_name: str, backend: Backend
) -> Conversation:
    """Play every user turn; `budget.max_llm_calls` replies at most per turn (BFCL's step limit)."""
    protocol = get_protocol(protocol_name)
    chat = BudgetedChat(endpoint, budget)
    messages = [{"role": "system", "content": protocol.system_prompt(item.functions, extra=item.system)}]
    talk = Conversation()
    try:
        for turn in item.turns:
            messages.extend({"role": "user", "content": text} for text in turn)
            talk.answer = None
            for _ in range(budget.max_llm_calls):
                completion = await chat.complete(messages)
                if completion is None:
                    talk.cut = "context"
                    return talk
                talk.actions.append(completion.text)
                messages.append({"role": "assistant", "content": completion.text})
                if completion.finish_reason == "length":
                    talk.cut = "generation"
                    return talk
                parsed = protocol.parse(completion.text)
                if not parsed.has_markup:
                    talk.answer = completion.text
                    break
                messages.extend(chat.clip(_step(protocol, backend, parsed)))
            else:
                talk.cut = "calls"
                return talk
    except EndpointError as exc:
        talk.error = str(exc)
    return talk


def played(item: AgenticItem, protocol_name: str, talk: Conversation) -> Played:
    """The episode line (scored with bfcl-eval's agentic checker when the item has answers) and action log."""
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import agentic_checker

    record: dict[str, Any] = {
        "task_id": item.id,
        "category": item.category,
        "scenario": item.scenario,
        "steps": len(talk.actions),
        "truncated": talk.cut != "none",
        "cut": talk.cut,
    }
    if item.answers is not None:
        if talk.answer is None:
            verdict = {"valid": False, "error_type": "agentic:no_last_message"}
        else:
            verdict = agentic_checker(talk.answer, list(item.answers))
        record["reward"] = 1.0 if verdict["valid"] else 0.0
        record["error_type"] = verdict.get("error_type")
        record["answer"] = None if talk.answer is None else talk.answer[:ANSWER_CHARS]
    if talk.error is not None:
        record["error"] = talk.error
    return Played(record, {"task_id": item.id, "protocol": protocol_name, "actions": talk.actions})
