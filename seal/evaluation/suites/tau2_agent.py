"""tau2-bench's agent, its text in and out through a SEAL protocol (tau2's LLMAgent, subclassed).

tau2's own LLMAgent sends the tools as an OpenAI `tools` field and reads native tool calls; the models SEAL
trains call tools in text (qwen_fc, llama3_json, python_list), so this agent renders the conversation for the
protocol instead: tau2's system prompt (instructions and domain policy) after the protocol's tool block, the
user's messages as user turns, tool results as the protocol's observation, its own earlier replies as it
wrote them. A reply without call markup is a message to the user; a reply with calls becomes tau2 tool calls
once every call names a domain tool and has valid JSON arguments. Any problem rejects the whole reply, as in
SEAL's environment (docs/design.md §3.4): the model reads the protocol's error text and answers again, within
the same agent turn, and tau2 only ever sees accepted messages.

tau2 runs each simulation synchronously in a worker thread; the agent's requests go through the run's
`ChatEndpoint` on the event loop (`Link`), under the run's context budget. A limit that cuts the conversation
raises `Cut`; an endpoint failure raises `EndpointError`; the suite records either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from tau2.agent.llm_agent import LLMAgent, LLMAgentState
from tau2.data_model.message import (
    AssistantMessage,
    Message,
    MultiToolMessage,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.message import ToolCall as Tau2ToolCall

from seal.bfcl.calls import InvalidCallError, ToolCall
from seal.evaluation.budget import BudgetedChat, ContextBudget
from seal.evaluation.endpoint import ChatEndpoint, Completion
from seal.protocol import get_protocol

LINK_KEY = "seal_link"
"""The key of `llm_args` that carries the `Link` into tau2's agent constructor."""
TEXT_KEY = "seal_text"
REJECTED_KEY = "seal_rejected"
"""`raw_data` of an accepted message: its text, and the rejected replies (with their error text) before it."""
EMPTY_REPLY = (
    "You sent an empty message. Each message must contain either a text content (message to the user) "
    "or tool calls (actions to perform)."
)


class Cut(Exception):
    """A limit ended the conversation: `context` (window full), `calls` (--max-llm-calls) or `generation`
    (a reply cut by max_tokens, never sent on)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Link:
    """One simulation's way to the endpoint: the event loop that owns the client, the budget, the protocol,
    and the texts the model wrote (the action log)."""

    loop: asyncio.AbstractEventLoop
    endpoint: ChatEndpoint
    budget: ContextBudget
    protocol: str
    actions: list[str] = field(default_factory=list)

    def wait(self, coroutine: Coroutine[Any, Any, Completion | None]) -> Completion | None:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()


class ProtocolAgent(LLMAgent):
    """tau2's LLM agent speaking a SEAL protocol through the run's endpoint."""

    def __init__(self, tools: list, domain_policy: str, llm: str | None = None, llm_args: dict | None = None):
        args = dict(llm_args or {})
        self.link: Link = args.pop(LINK_KEY)
        super().__init__(tools=tools, domain_policy=domain_policy, llm=llm, llm_args=args)
        self.protocol = get_protocol(self.link.protocol)
        self.chat = BudgetedChat(self.link.endpoint, self.link.budget)
        self.tool_names = {tool.name for tool in tools}
        self.calls = 0

    def set_seed(self, seed: int) -> None:
        """Replies are greedy (temperature 0): the seed changes nothing for this agent."""

    def _transcript(self, state: LLMAgentState) -> list[dict[str, str]]:
        docs = [tool.openai_schema["function"] for tool in self.tools]
        messages = [
            {"role": "system", "content": self.protocol.system_prompt(docs, extra=self.system_prompt)}
        ]
        results: list[str] = []
        for message in state.messages:
            if isinstance(message, ToolMessage):
                results.append(message.content or "")
                continue
            if results:
                messages.extend(self.chat.clip(self.protocol.observation(results)))
                results = []
            messages.extend(self._rendered(message))
        if results:
            messages.extend(self.chat.clip(self.protocol.observation(results)))
        return messages

    def _rendered(self, message: Message) -> list[dict[str, str]]:
        if isinstance(message, UserMessage):
            return [{"role": "user", "content": message.content or ""}]
        raw = (message.raw_data or {}) if isinstance(message, AssistantMessage) else {}
        shown: list[dict[str, str]] = []
        for text, error in raw.get(REJECTED_KEY, []):
            shown += [{"role": "assistant", "content": text}, {"role": "user", "content": error}]
        text = raw.get(TEXT_KEY)
        if text is None:
            calls = [ToolCall(call.name, call.arguments) for call in message.tool_calls or []]
            text = self.protocol.format_calls(calls) if calls else message.content or ""
        return [*shown, {"role": "assistant", "content": text}]

    def _reply(self, messages: list[dict[str, str]]) -> str:
        if self.calls >= self.link.budget.max_llm_calls:
            raise Cut("calls")
        completion = self.link.wait(self.chat.complete(messages))
        if completion is None:
            raise Cut("context")
        self.calls += 1
        self.link.actions.append(completion.text)
        if completion.finish_reason == "length":
            raise Cut("generation")
        return completion.text

    def _accepted(self, text: str) -> AssistantMessage | str:
        """The tau2 message the reply stands for, or the error text that rejects it."""
        parsed = self.protocol.parse(text)
        if not parsed.has_markup:
            return AssistantMessage(role="assistant", content=text) if text.strip() else EMPTY_REPLY
        problems = list(parsed.errors)
        calls: list[Tau2ToolCall] = []
        for candidate in parsed.calls:
            if not isinstance(candidate.name, str) or candidate.name not in self.tool_names:
                problems.append(
                    f"Tool '{str(candidate.name)[:80]}' is not available in the current tool list."
                )
                continue
            try:
                call = ToolCall(candidate.name, candidate.arguments)
            except InvalidCallError as exc:
                problems.append(str(exc))
                continue
            calls.append(
                Tau2ToolCall(id=f"call_{self.calls}_{len(calls)}", name=call.name, arguments=call.arguments)
            )
        if problems:
            return self.protocol.error_observation(problems)[-1]["content"]
        return AssistantMessage(role="assistant", content=None, tool_calls=calls)

    def generate_next_message(
        self, message: UserMessage | ToolMessage | MultiToolMessage, state: LLMAgentState
    ) -> tuple[AssistantMessage, LLMAgentState]:
        if isinstance(message, MultiToolMessage):
            state.messages.extend(message.tool_messages)
        else:
            state.messages.append(message)
        messages = self._transcript(state)
        rejected: list[tuple[str, str]] = []
        while True:
            text = self._reply(messages)
            accepted = self._accepted(text)
            if isinstance(accepted, AssistantMessage):
                break
            rejected.append((text, accepted))
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": accepted}]
        accepted.raw_data = {TEXT_KEY: text, REJECTED_KEY: rejected}
        state.messages.append(accepted)
        return accepted, state
