"""Scripted OpenAI-compatible endpoints for the out-of-distribution suites (served by
tests/scripted_endpoint.py's `serve`).

`MemoryOracle` plays BFCL V4 memory: in the prerequisite conversation where the user gives their name, it
stores that first message in the backend (kv and vector: archival_memory_add, rec_sum: memory_append), then
acknowledges each turn; asked a question, it first searches the backend (key search, vector retrieval,
memory_retrieve), then answers in bfcl's answer format with the ground truth (`wrong`: with a wrong answer).

`Tau2Agent` and `Tau2User` play a tau2 task's expected actions in the order the task lists them: the agent
makes its own (one protocol call per reply) and, where the next ones are the user's (telecom: toggling
airplane mode, roaming, data on the phone), asks the user to do them; the user makes those as native OpenAI
tool calls, one per reply, then says it is done. The user opens by naming the task (found from the
simulator's system prompt) and stops once the agent is done. `wrong` changes one argument of the agent's last
action; `skip_user_action` leaves the user's last action out.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse, Response

import seal.bfcl  # noqa: F401  (sets BFCL_PROJECT_ROOT before bfcl_eval loads)
from seal.bfcl.calls import ToolCall
from seal.protocol import DEFAULT_PROTOCOL, get_protocol
from tests.support.scripted_endpoint import completion

WRONG_ANSWER = "zqx-unknown"
STORED_IF = "My name is"
"""Only the conversation where the user introduces themself is stored (one entry: the vector backend re-embeds
every entry at each conversation's start, and MiniLM on a busy CPU takes a second a batch)."""
STORED_CHARS = 120
DONE_TEXT = "Your request is complete. Is there anything else?"
ASK_TEXT = "Please do the next steps on your phone and tell me once they are done."
USER_DONE_TEXT = "I did what you asked."
STOP = "###STOP###"
STORE = {"kv": "archival_memory_add", "vector": "archival_memory_add", "rec_sum": "memory_append"}
SEARCH = {
    "kv": "archival_memory_key_search",
    "vector": "archival_memory_retrieve",
    "rec_sum": "memory_retrieve",
}


@dataclass
class ScriptedServer:
    """What `tests.scripted_endpoint.serve` needs: a model list and an answer per chat request."""

    models: tuple[str, ...] = ("oracle",)
    list_models: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)

    def listing(self, headers: dict[str, str]) -> Response:
        data = [{"id": name, "object": "model", "owned_by": "scripted"} for name in self.models]
        return JSONResponse({"object": "list", "data": data})

    async def answer(self, body: dict[str, Any], headers: dict[str, str]) -> Response:
        self.requests.append(body)
        if body.get("model") not in self.models:
            return JSONResponse({"error": {"message": "model not found", "code": 404}}, status_code=404)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        reply = self.reply(body["messages"])
        text, calls = (reply, None) if isinstance(reply, str) else (None, reply)
        return JSONResponse({**completion(text, usage, tool_calls=calls), "model": body["model"]})

    def reply(self, messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        """The reply's text, or its native OpenAI tool calls."""
        raise NotImplementedError


def memory_answers() -> dict[str, tuple[str, ...]]:
    """Ground-truth answers by question text (the 155 questions are distinct)."""
    from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

    answers = {a["id"]: a["ground_truth"] for a in load_ground_truth_entry("memory_kv")}
    entries = load_dataset_entry("memory_kv", include_prereq=False, include_language_specific_hint=False)
    return {
        e["question"][0][-1]["content"]: tuple(answers[e["id"].replace("memory_kv", "memory", 1)])
        for e in entries
    }


def backend_of(system: str) -> str:
    if "memory_append" in system:
        return "rec_sum"
    return "kv" if "archival_memory_key_search" in system else "vector"


@dataclass
class MemoryOracle(ScriptedServer):
    wrong: bool = False
    protocol: str = DEFAULT_PROTOCOL

    def __post_init__(self) -> None:
        self.answers = memory_answers()
        self.writer = get_protocol(self.protocol)

    def reply(self, messages: list[dict[str, Any]]) -> str:
        backend = backend_of(messages[0]["content"])
        users = [i for i, m in enumerate(messages) if m["role"] == "user" and not self._is_result(m)]
        last_user = messages[users[-1]]["content"]
        called = any(m["role"] == "assistant" for m in messages[users[-1] :])
        if last_user in self.answers:
            if not called:
                arguments = {} if backend == "rec_sum" else {"query": last_user}
                return self.writer.format_calls([ToolCall(SEARCH[backend], arguments)])
            answer = WRONG_ANSWER if self.wrong else self.answers[last_user][0]
            return str({"answer": answer, "context": "from my memory"})
        if len(users) == 1 and not called and STORED_IF in last_user:
            start = last_user.index(STORED_IF)
            return self.writer.format_calls([self._store(backend, last_user[start : start + STORED_CHARS])])
        return "Noted, thank you."

    def _is_result(self, message: dict[str, Any]) -> bool:
        return self.writer.name == "qwen_fc" and message["content"].startswith("<tool_response>")

    @staticmethod
    def _store(backend: str, text: str) -> ToolCall:
        if backend == "kv":
            return ToolCall(STORE[backend], {"key": f"note_{zlib.crc32(text.encode()):x}", "value": text})
        return ToolCall(STORE[backend], {"text": text})


@dataclass
class WebSearchOracle(ScriptedServer):
    """Searches once with the question, then answers it with bfcl's ground truth."""

    protocol: str = DEFAULT_PROTOCOL

    def __post_init__(self) -> None:
        from bfcl_eval.utils import load_dataset_entry, load_ground_truth_entry

        answers = {a["id"]: a["ground_truth"] for a in load_ground_truth_entry("web_search_base")}
        entries = load_dataset_entry(
            "web_search_base", include_prereq=False, include_language_specific_hint=False
        )
        self.answers = {
            e["question"][0][-1]["content"]: answers[e["id"].replace("_base", "")] for e in entries
        }
        self.writer = get_protocol(self.protocol)

    def reply(self, messages: list[dict[str, Any]]) -> str:
        question = next(m["content"] for m in messages if m["role"] == "user")
        if not any(m["role"] == "assistant" for m in messages):
            return self.writer.format_calls([ToolCall("search_engine_query", {"keywords": question[:60]})])
        return str({"answer": self.answers[question][0], "context": "searched"})


def tau2_task(domain: str, task_id: str) -> Any:
    from tau2.run import get_tasks

    return next(t for t in get_tasks(domain, task_split_name="base") if t.id == task_id)


def expected_actions(task: Any) -> list[Any]:
    return list(task.evaluation_criteria.actions or [])


def next_turn(actions: list[Any], calls: int, asks: int) -> int | None:
    """The index of the agent's next expected action, or of the first user action it must ask for next
    (each ask covers a run of consecutive user actions), given its calls and asks so far; None when done."""
    index = 0
    while index < len(actions):
        if actions[index].requestor == "assistant":
            if calls == 0:
                return index
            calls, index = calls - 1, index + 1
            continue
        if asks == 0:
            return index
        asks -= 1
        while index < len(actions) and actions[index].requestor == "user":
            index += 1
    return None


@dataclass
class Tau2Agent(ScriptedServer):
    """Knows the expected actions of the tasks it is given, by the user's opening line."""

    tasks: dict[str, Any] = field(default_factory=dict)
    wrong: bool = False
    protocol: str = DEFAULT_PROTOCOL

    def __post_init__(self) -> None:
        self.writer = get_protocol(self.protocol)

    def reply(self, messages: list[dict[str, Any]]) -> str:
        opening = next((m["content"] for m in messages if m["role"] == "user"), "")
        task = self.tasks.get(opening)
        if task is None:
            return DONE_TEXT
        actions = expected_actions(task)
        mine = [m["content"] for m in messages if m["role"] == "assistant"]
        calls = sum(1 for text in mine if self.writer.parse(text).calls)
        index = next_turn(actions, calls, mine.count(ASK_TEXT))
        if index is None:
            return DONE_TEXT
        if actions[index].requestor == "user":
            return ASK_TEXT
        arguments = dict(actions[index].arguments)
        if self.wrong and index == max(i for i, a in enumerate(actions) if a.requestor == "assistant"):
            key = sorted(arguments)[-1]
            arguments[key] = f"{arguments[key]}-wrong" if isinstance(arguments[key], str) else [WRONG_ANSWER]
        return self.writer.format_calls([ToolCall(actions[index].name, arguments)])


@dataclass
class Tau2User(ScriptedServer):
    """tau2's user simulator's endpoint: names the task, makes the user's expected actions when the agent
    asks for them, then stops once the agent says it is done."""

    openings: dict[str, str] = field(default_factory=dict)
    """The task's user instructions (as the simulator's system prompt holds them) -> the opening line."""
    tasks: dict[str, Any] = field(default_factory=dict)
    """The opening line -> the task."""
    skip_user_action: bool = False

    def reply(self, messages: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        opening = next((line for text, line in self.openings.items() if text in system), "Hello.")
        spoken = [m for m in messages if m["role"] == "assistant"]
        if not spoken:
            return opening
        last = messages[-1]
        if last["role"] == "tool" or last.get("content") == ASK_TEXT:
            return self._act(opening, sum(len(m.get("tool_calls") or []) for m in spoken), last["role"])
        return STOP if DONE_TEXT in (last.get("content") or "") else "Please go on."

    def _act(self, opening: str, made: int, after: str) -> str | list[dict[str, Any]]:
        """The next user action of the run the agent asked for, or word that the run is done."""
        actions = expected_actions(self.tasks[opening]) if opening in self.tasks else []
        mine = [i for i, a in enumerate(actions) if a.requestor == "user"]
        if self.skip_user_action:
            mine = mine[:-1]
        if made >= len(mine) or (after == "tool" and mine[made] != mine[made - 1] + 1):
            return USER_DONE_TEXT
        action = actions[mine[made]]
        call = {"name": action.name, "arguments": json.dumps(action.arguments)}
        return [{"id": f"user_call_{made}", "type": "function", "function": call}]


def tau2_pair(
    cases: list[tuple[str, str]], wrong: bool = False, skip_user_action: bool = False
) -> tuple[Tau2Agent, Tau2User]:
    """The agent and user endpoints for the (domain, task id) cases."""
    tasks, openings = {}, {}
    for domain, task_id in cases:
        task = tau2_task(domain, task_id)
        line = f"Hello, I am calling about {domain} task {task_id}."
        tasks[line] = task
        openings[str(task.user_scenario)] = line
    user = Tau2User(models=("user",), openings=openings, tasks=tasks, skip_user_action=skip_user_action)
    return Tau2Agent(tasks=tasks, wrong=wrong), user


def dump(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, indent=1)[:4000]
