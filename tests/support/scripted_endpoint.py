"""Scripted OpenAI-compatible chat endpoints served on 127.0.0.1, for `seal eval` tests.

The oracle recognises the task from the first user message (so a test sample must not hold two tasks
with the same opening question) and the turn from its own end-of-turn replies: it sends the ground
truth calls of the current turn, then `DONE` to end the turn; GT-empty turns get `DONE` at once.
Faults can be injected per task from a given turn on. Like vLLM, the endpoint lists its models under
`GET /v1/models` (with `max_model_len` when it has a window), reports `usage`, and refuses with HTTP 400
"maximum context length" a request whose prompt plus `max_tokens` exceed its window; prompt tokens
are `scripted_tokens` of the messages. With `api_key` set it answers 401 to any other key.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
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
from seal.protocol import DEFAULT_PROTOCOL, get_protocol
from seal.protocol.ground_truth import END_OF_TURN as DONE

SILENT = "I am sorry, I cannot help with that."
FAULTS = ("http500", "slow", "garbage", "no_content", "flaky", "echo_auth")


def scripted_tokens(messages: list[dict[str, str]]) -> int:
    """The scripted endpoint's token count of a prompt: 4 per message plus a token per 4 characters."""
    return sum(4 + len(m["content"]) // 4 for m in messages)


def completion(
    content: Any,
    usage: dict[str, int] | None = None,
    finish_reason: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat completion body; with `tool_calls` (OpenAI's native form) the reply is those calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
        finish_reason = "tool_calls"
    body = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@dataclass
class Script:
    """What the endpoint answers. `faults` maps a task id to (fault, first turn it applies to);
    `noisy` mixes right, partial, wrong, rejected, broken and never-ending replies per turn."""

    task_ids: Sequence[str] = ()
    protocol: str = DEFAULT_PROTOCOL
    silent: bool = False
    noisy: bool = False
    faults: dict[str, tuple[str, int]] = field(default_factory=dict)
    slow_seconds: float = 1.5
    models: tuple[str, ...] = ("oracle",)
    window: int | None = None
    advertise_window: bool = True
    list_models: bool = True
    """Serve `GET /v1/models` (vLLM and OpenAI do; some servers do not)."""
    listed: bool = True
    """Name the served models there (`transformers serve` lists only its Hugging Face cache: none)."""
    api_key: str | None = None
    repeats: dict[str, str] = field(default_factory=dict)
    """Task id -> the one reply sent to every request of that task: a model stuck in a loop."""
    fails_under_seed: Callable[[str, int | None], bool] | None = None
    """(task id, the `seed` of an episode's opening request) -> whether the model answers that episode with
    `SILENT` throughout: a sampling model whose verdict on a task changes with the seed."""
    count: Callable[[list[dict[str, str]]], int] = scripted_tokens
    """How the endpoint counts prompt tokens (a real tokenizer in the `--tokenizer` test)."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    refusals: list[dict[str, int]] = field(default_factory=list)
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
        self.writer = get_protocol(self.protocol)
        self.truth = {t: ground_truth_calls(get_task(t)) for t in self.task_ids}

    def locate(self, messages: list[dict[str, str]]) -> tuple[str | None, int, bool]:
        """(task id, GT turn, whether this turn's calls were already sent)."""
        first = next((m["content"] for m in messages if m["role"] == "user"), "")
        replies = [m["content"] for m in messages if m["role"] == "assistant"]
        turn = replies.count(DONE)
        last_done = max((i for i, text in enumerate(replies) if text == DONE), default=-1)
        return self.by_question.get(first), turn, len(replies) > last_done + 1

    def sampled_failure(self, task_id: str, messages: list[dict[str, str]], seed: int | None) -> bool:
        """The verdict drawn on the episode's opening request and kept by its later ones (each of which
        carries a seed of its own); never without `fails_under_seed`."""
        if self.fails_under_seed is None:
            return False
        first = next((m["content"] for m in messages if m["role"] == "assistant"), None)
        return self.fails_under_seed(task_id, seed) if first is None else first == SILENT

    def oracle(self, task_id: str | None, turn: int, sent: bool) -> str:
        if task_id is None:
            return DONE
        calls = self.truth[task_id][turn]
        if self.noisy:
            return self.noisy_reply(task_id, turn, sent, calls)
        return DONE if sent or not calls else self.writer.format_calls(calls)

    def noisy_reply(self, task_id: str, turn: int, sent: bool, calls: list[ToolCall]) -> str:
        """A fixed choice per (task, turn), so a rerun sends the same text."""
        kind = zlib.crc32(f"{task_id}:{turn}".encode()) % 8
        if kind == 5 and calls:
            return self.writer.format_calls(calls)
        if sent:
            return DONE
        if kind == 1 and len(calls) > 1:
            calls = calls[:-1]
        elif kind == 2:
            calls = [ToolCall("no_such_tool", {})]
        elif kind == 3 and calls:
            return self.writer.format_calls(calls)[:-3]
        elif kind == 4 and calls:
            calls = [ToolCall(calls[0].name, {key: "x" for key in calls[0].arguments}), *calls[1:]]
        return self.writer.format_calls(calls) if calls else DONE

    def refused_key(self, headers: dict[str, str]) -> Response | None:
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "Invalid API key", "code": 401}}, status_code=401)
        return None

    def listing(self, headers: dict[str, str]) -> Response:
        refused = self.refused_key(headers)
        if refused is not None:
            return refused
        extra = {"max_model_len": self.window} if self.window and self.advertise_window else {}
        named = self.models if self.listed else ()
        data = [{"id": name, "object": "model", "owned_by": "scripted", **extra} for name in named]
        return JSONResponse({"object": "list", "data": data})

    def over_window(self, prompt: int, max_tokens: int) -> Response | None:
        """vLLM's refusals, worded as vLLM words them."""
        if self.window is None:
            return None
        if prompt >= self.window:
            message = (
                f"This model's maximum context length is {self.window} tokens. However, your request "
                f"has {prompt} input tokens. Please reduce the length of the input messages."
            )
        elif prompt + max_tokens > self.window:
            message = (
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
                f"maximum context length is {self.window} tokens and your request has {prompt} input "
                f"tokens ({max_tokens} > {self.window} - {prompt})."
            )
        else:
            return None
        self.refusals.append({"prompt": prompt, "max_tokens": max_tokens})
        error = {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
        return JSONResponse(error, status_code=400)

    def reply(self, text: str, prompt: int, max_tokens: int) -> Response:
        """The text cut to `max_tokens` (finish_reason "length"), with its usage."""
        tokens = 1 + len(text) // 4
        reason = "stop"
        if tokens > max_tokens:
            text, tokens, reason = text[: 4 * max_tokens], max_tokens, "length"
        usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
        return JSONResponse(completion(text, usage, reason))

    async def answer(self, body: dict[str, Any], headers: dict[str, str]) -> Response:
        self.requests.append(body)
        self.headers.append(headers)
        refused = self.refused_key(headers)
        if refused is not None:
            return refused
        if body.get("model") not in self.models:
            return JSONResponse({"error": {"message": "model not found", "code": 404}}, status_code=404)
        prompt = self.count(body["messages"])
        too_long = self.over_window(prompt, body["max_tokens"])
        if too_long is not None:
            return too_long
        if self.silent:
            return self.reply(SILENT, prompt, body["max_tokens"])
        messages = body["messages"]
        task_id, turn, sent = self.locate(messages)
        if task_id in self.repeats:
            return self.reply(self.repeats[task_id], prompt, body["max_tokens"])
        if self.sampled_failure(task_id or "", messages, body.get("seed")):
            return self.reply(SILENT, prompt, body["max_tokens"])
        fault, from_turn = self.faults.get(task_id or "", ("", 0))
        if fault and turn >= from_turn:
            faulty = await self._fault(fault, (task_id or "", len(messages)), headers)
            if faulty is not None:
                return faulty
        return self.reply(self.oracle(task_id, turn, sent), prompt, body["max_tokens"])

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

    if script.list_models:

        @app.get("/v1/models")
        async def models(request: Request) -> Response:
            return script.listing(dict(request.headers))

    return app


@contextmanager
def serve(script: Script, start_timeout: float = 10.0, log_level: str = "warning") -> Iterator[str]:
    """Serve `script` on a free loopback port in a thread; yields the base URL (`.../v1`). `log_level`
    "critical" keeps the endpoint's own logs (a client that left mid-request) out of the test's stderr."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        make_app(script), log_level=log_level, lifespan="off", timeout_graceful_shutdown=1
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
