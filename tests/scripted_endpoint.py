"""Scripted OpenAI-compatible chat endpoints served on 127.0.0.1, for `seal eval` tests.

The oracle recognises the task from the first user message (so a test sample must not hold two tasks
with the same opening question) and the turn from its own end-of-turn replies: it sends the ground
truth calls of the current turn, then `DONE` to end the turn; GT-empty turns get `DONE` at once.
Faults can be injected per task from a given turn on.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

import seal.bfcl  # noqa: F401  (sets BFCL_PROJECT_ROOT before bfcl_eval loads)
from seal.bfcl.calls import ToolCall
from seal.bfcl.ground_truth import ground_truth_calls
from seal.bfcl.tasks import get_task
from seal.protocol import get_protocol
from tests.helpers import END_OF_TURN as DONE

SILENT = "I am sorry, I cannot help with that."
FAULTS = ("http500", "slow", "garbage", "no_content", "flaky", "echo_auth")


def completion(content: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        ],
    }


@dataclass
class Script:
    """What the endpoint answers. `faults` maps a task id to (fault, first turn it applies to);
    `noisy` mixes right, partial, wrong, rejected, broken and never-ending replies per turn."""

    task_ids: Sequence[str] = ()
    format: str = "qwen_fc"
    silent: bool = False
    noisy: bool = False
    faults: dict[str, tuple[str, int]] = field(default_factory=dict)
    slow_seconds: float = 1.5
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    _seen: set[tuple[str, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        unknown = {fault for fault, _ in self.faults.values()} - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault(s) {sorted(unknown)}; known: {FAULTS}")
        self.by_question: dict[str, str] = {}
        for task_id in self.task_ids:
            question = get_task(task_id).questions[0][0]["content"]
            if question in self.by_question:
                raise ValueError(f"{task_id} and {self.by_question[question]} open with the same question")
            self.by_question[question] = task_id
        self.protocol = get_protocol(self.format)
        self.truth = {t: ground_truth_calls(get_task(t)) for t in self.task_ids}

    def locate(self, messages: list[dict[str, str]]) -> tuple[str | None, int, bool]:
        """(task id, GT turn, whether this turn's calls were already sent)."""
        first = next((m["content"] for m in messages if m["role"] == "user"), "")
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        turn = replies.count(DONE)
        last_done = max((i for i, text in enumerate(replies) if text == DONE), default=-1)
        return self.by_question.get(first), turn, len(replies) > last_done + 1

    def oracle(self, task_id: str | None, turn: int, sent: bool) -> str:
        if task_id is None:
            return DONE
        calls = self.truth[task_id][turn]
        if self.noisy:
            return self.noisy_reply(task_id, turn, sent, calls)
        return DONE if sent or not calls else self.protocol.format_calls(calls)

    def noisy_reply(self, task_id: str, turn: int, sent: bool, calls: list[ToolCall]) -> str:
        """A fixed choice per (task, turn), so a rerun sends the same text."""
        kind = zlib.crc32(f"{task_id}:{turn}".encode()) % 8
        if kind == 5 and calls:
            return self.protocol.format_calls(calls)
        if sent:
            return DONE
        if kind == 1 and len(calls) > 1:
            calls = calls[:-1]
        elif kind == 2:
            calls = [ToolCall("no_such_tool", {})]
        elif kind == 3 and calls:
            return self.protocol.format_calls(calls)[:-3]
        elif kind == 4 and calls:
            calls = [ToolCall(calls[0].name, {key: "x" for key in calls[0].arguments}), *calls[1:]]
        return self.protocol.format_calls(calls) if calls else DONE

    async def answer(self, body: dict[str, Any], headers: dict[str, str]) -> Response:
        self.requests.append(body)
        self.headers.append(headers)
        if self.silent:
            return JSONResponse(completion(SILENT))
        messages = body["messages"]
        task_id, turn, sent = self.locate(messages)
        fault, from_turn = self.faults.get(task_id or "", ("", 0))
        if fault and turn >= from_turn:
            faulty = await self._fault(fault, (task_id or "", len(messages)), headers)
            if faulty is not None:
                return faulty
        return JSONResponse(completion(self.oracle(task_id, turn, sent)))

    async def _fault(
        self, fault: str, request_key: tuple[str, int], headers: dict[str, str]
    ) -> Response | None:
        if fault == "http500":
            return PlainTextResponse("internal error", status_code=500)
        if fault == "slow":
            await asyncio.sleep(self.slow_seconds)
            return None
        if fault == "garbage":
            return PlainTextResponse('{"choices": [', media_type="application/json")
        if fault == "no_content":
            return JSONResponse(completion(None))
        if fault == "flaky" and request_key not in self._seen:
            self._seen.add(request_key)
            return PlainTextResponse("busy", status_code=503, headers={"Retry-After": "0"})
        if fault == "echo_auth":
            return PlainTextResponse(f"invalid credentials: {headers.get('authorization')}", status_code=401)
        return None


def make_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await script.answer(await request.json(), dict(request.headers))

    return app


@contextmanager
def serve(script: Script, start_timeout: float = 10.0) -> Iterator[str]:
    """Serve `script` on a free loopback port in a thread; yields the base URL (`.../v1`)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        make_app(script), log_level="warning", lifespan="off", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("scripted endpoint did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
