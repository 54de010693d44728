"""A chat-completions client for any OpenAI-compatible endpoint.

Pooled (one `httpx.AsyncClient` per run, no proxy settings from the environment), with bounded
exponential backoff on what is usually transient (connect errors, timeouts, 408/429/5xx). Anything
else, and a body that is not a chat completion with text content, raises `EndpointError` with a
one-line reason; the runner records it on the episode instead of stopping the run. A refusal
because prompt plus `max_tokens` exceed the model's context window is not the endpoint's failure but
the conversation's size: it raises `ContextLengthError`, which the runner answers with a smaller
`max_tokens` or a truncated episode. The API key only ever lives in the client's request headers,
and is masked out of every error message.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import random
import re
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from seal.connection import is_refused, refused_at
from seal.env.driver import ModelError
from seal.protocol.representable import unicode_text
from seal.urls import MASK, masked_url, url_secrets

RETRY_STATUS = frozenset({408, 429})
AUTH_STATUS = frozenset({401, 403})
EXCERPT_CHARS = 200
SHORT_EXCERPT_CHARS = 60
ENDPOINT = "the endpoint (--base-url)"
"""What a refused connection asks to check."""
"""Per body, where one line names two answers."""
PREFLIGHT_TIMEOUT_S = 10.0
NO_ROUTE_STATUS = frozenset({404, 405, 501})
"""What a server without a chat-completions route answers a POST there."""
MODEL_IN_REFUSAL = re.compile(r"model", re.IGNORECASE)
"""A 404 that names a model refuses the model (OpenAI's and vLLM's `model_not_found`); a bare one, the URL."""
CONTEXT_REFUSAL = re.compile(r"maximum context length|context length|context window", re.IGNORECASE)
WINDOW_IN_REFUSAL = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
PROMPT_IN_REFUSAL = (
    re.compile(r"(\d+) input tokens", re.IGNORECASE),  # vLLM >= 0.6
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),  # older vLLM, OpenAI
    re.compile(r"messages resulted in (\d+) tokens", re.IGNORECASE),  # OpenAI
)


class EndpointError(ModelError):
    """The endpoint gave no usable answer: fails the episode that asked, never the run."""


class ContextLengthError(Exception):
    """HTTP 400 because prompt + `max_tokens` exceed the model's window; the sizes it stated, if any."""

    def __init__(self, message: str, window: int | None, prompt_tokens: int | None) -> None:
        super().__init__(message)
        self.window = window
        self.prompt_tokens = prompt_tokens


class PreflightError(RuntimeError):
    """The endpoint cannot serve this run at all (unreachable, unknown model, refused key): one line."""


@dataclass(frozen=True)
class Completion:
    """The assistant's text and the token counts of the response's `usage`, when it has one."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    """`length` when the reply used its whole `max_tokens` without ending: never sent to the environment."""

    @property
    def context_tokens(self) -> int | None:
        """Tokens of the conversation including this reply: a lower bound of the next prompt."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ModelInfo:
    """What the preflight learnt: the model is served, and its context window when the server says."""

    window: int | None


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found:
            return int(found.group(1))
    return None


def _usage(body: Any, key: str) -> int | None:
    usage = body.get("usage") if isinstance(body, dict) else None
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True)
class RetryPolicy:
    """`retries` extra attempts; delays of `backoff`, 2·`backoff`, ... (jittered, capped), or longer
    when the server sends Retry-After."""

    retries: int = 3
    backoff: float = 1.0
    max_delay: float = 60.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_delay < 0:
            raise ValueError("retries, backoff and max_delay must not be negative")

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        wait = self.backoff * 2**attempt * random.uniform(0.5, 1.0)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.max_delay)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def request_seed(seed: int, messages: list[dict[str, str]]) -> int:
    """The seed one request carries: drawn from the run's `seed` and the conversation so far.

    vLLM seeds a generator per request from the value it is sent, so one value sent with every request
    gives every request the same noise at each position: a sample's episodes then succeed or fail
    together across tasks and turns. Derived per conversation, seeds keep a rerun identical while tasks
    and turns sample independently. 31 bits: any server's integer seed holds it."""
    text = json.dumps([seed, messages], ensure_ascii=False, separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "big") >> 1


class ChatEndpoint:
    """`await endpoint.complete(messages)` -> the assistant's text (greedy unless `temperature` says
    otherwise; no `tools` field: the protocol puts the tools in the system prompt). `seed`, when set,
    seeds every request (`request_seed`), so a sampled run can be repeated."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        max_tokens: int,
        api_key: str | None = None,
        timeout: float = 300.0,
        policy: RetryPolicy | None = None,
        max_connections: int = 8,
        temperature: float = 0.0,
        seed: int | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.temperature = temperature
        self.seed = seed
        self.url = self.base_url + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.policy = policy or RetryPolicy()
        self._secret = api_key or None
        self._masked = sorted({s for s in (api_key, *url_secrets(base_url)) if s}, key=len, reverse=True)
        """Masked out of every message: the key, and the credentials written into the URL."""
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"ChatEndpoint(url={masked_url(self.url)!r}, model={self.model!r})"

    def sampling(self, temperature: float, seed: int | None) -> ChatEndpoint:
        """The same endpoint and connection pool, its requests sent with `temperature` and `seed`: one
        sample of a sampled run."""
        view = copy.copy(self)
        view.temperature, view.seed = temperature, seed
        return view

    async def __aenter__(self) -> ChatEndpoint:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.aclose()

    def _clean(self, text: str, limit: int = EXCERPT_CHARS) -> str:
        """One line, bounded, with the API key and the URL's credentials masked (a server may echo
        request headers, a library the URL)."""
        text = " ".join(text.split())
        for secret in self._masked:
            text = text.replace(secret, MASK)
        return text if len(text) <= limit else text[:limit] + "..."

    async def preflight(self) -> ModelInfo:
        """One cheap request, no retries: the endpoint answers, serves the model and accepts the key.

        `GET /models` (vLLM reports each model's `max_model_len` there); a server without that route, or
        one that lists no model at all (`transformers serve` lists only its Hugging Face cache and loads
        a model folder on request), is asked for a one-token completion instead. Raises `PreflightError`
        with one line.
        """
        where = self.base_url + "/models"
        try:
            response = await self._client.get(where, timeout=self._preflight_timeout)
        except httpx.RequestError as exc:
            raise PreflightError(self._clean(self._unanswered(masked_url(where), exc))) from None
        if response.status_code in AUTH_STATUS:
            raise PreflightError(self._refused_key(response))
        if response.status_code in (404, 405):
            return await self._probe_completion(response)
        if not response.is_success:
            raise PreflightError(self._answered(response))
        try:
            listed = [m for m in response.json()["data"] if isinstance(m, dict)]
        except (ValueError, KeyError, TypeError):
            raise PreflightError(
                self._clean(f"{masked_url(where)} is not a model list: {response.text}")
            ) from None
        if not listed:
            return await self._probe_completion(response)
        entry = next((m for m in listed if m.get("id") == self.model), None)
        if entry is None:
            served = ", ".join(str(m.get("id")) for m in listed[:10]) or "none"
            raise PreflightError(f"the endpoint does not serve model {self.model!r} (it serves: {served})")
        window = entry.get("max_model_len")
        return ModelInfo(window if isinstance(window, int) and window > 0 else None)

    async def _probe_completion(self, listing: httpx.Response) -> ModelInfo:
        payload = {"model": self.model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        try:
            response = await self._client.post(self.url, json=payload, timeout=self._preflight_timeout)
        except httpx.RequestError as exc:
            raise PreflightError(self._clean(self._unanswered(masked_url(self.url), exc))) from None
        if response.status_code in AUTH_STATUS:
            raise PreflightError(self._refused_key(response))
        if response.status_code in NO_ROUTE_STATUS and not MODEL_IN_REFUSAL.search(response.text):
            answers = [self._answered(answer, SHORT_EXCERPT_CHARS) for answer in (listing, response)]
            raise PreflightError(
                f"no OpenAI API at {masked_url(self.base_url)}: {', '.join(answers)}; "
                "is --base-url the API root (it usually ends in /v1)?"
            )
        if not response.is_success:
            raise PreflightError(f"model {self.model!r} refused: {self._answered(response)}")
        return ModelInfo(None)

    @property
    def _preflight_timeout(self) -> float:
        return min(self.timeout, PREFLIGHT_TIMEOUT_S)

    def _unanswered(self, where: str, exc: httpx.RequestError) -> str:
        """Why a request got no HTTP answer, and what to check."""
        kind = type(exc).__name__
        if is_refused(exc):
            return refused_at(where, ENDPOINT)
        if isinstance(exc, httpx.ConnectTimeout):
            return f"cannot reach {where}: no connection within {self._preflight_timeout:g} s ({kind})"
        if isinstance(exc, httpx.TimeoutException):
            return (
                f"{where} accepted the connection but sent no answer within {self._preflight_timeout:g} s "
                f"({kind}): is the server still starting, or is --base-url another service?"
            )
        return f"cannot reach {where}: {kind}: {exc or 'no detail'}"

    def _answered(self, response: httpx.Response, limit: int = EXCERPT_CHARS) -> str:
        """`URL answered HTTP n: body`, the body cleaned (or said to be empty), no user:password shown."""
        url = masked_url(str(response.request.url))
        body = self._clean(response.text, limit) or "(empty body)"
        return f"{url} answered HTTP {response.status_code}: {body}"

    def _refused_key(self, response: httpx.Response) -> str:
        sent = "the API key" if self._secret else "no API key (set OPENAI_API_KEY or --api-key-env)"
        return self._clean(f"the endpoint refused {sent}: HTTP {response.status_code}: {response.text}")

    async def complete(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> Completion:
        """One reply; `max_tokens` (default: the endpoint's) is what the caller's budget allows."""
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
        }
        if self.seed is not None:
            payload["seed"] = request_seed(self.seed, messages)
        attempts = self.policy.retries + 1
        retry_after: float | None = None
        reason = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(self.policy.delay(attempt - 1, retry_after))
            retry_after = None
            try:
                response = await self._client.post(self.url, json=payload)
            except httpx.TimeoutException as exc:
                reason = f"timed out after {self.timeout:g}s ({type(exc).__name__})"
                continue
            except httpx.RequestError as exc:
                refused = is_refused(exc)
                why = (
                    refused_at(masked_url(self.url), ENDPOINT) if refused else f"{type(exc).__name__}: {exc}"
                )
                reason = self._clean(why)
                continue
            if response.status_code in RETRY_STATUS or response.status_code >= 500:
                reason = self._clean(f"HTTP {response.status_code}: {response.text}")
                retry_after = _retry_after(response)
                continue
            if response.status_code == 400 and CONTEXT_REFUSAL.search(response.text):
                raise ContextLengthError(
                    self._clean(f"HTTP 400: {response.text}"),
                    window=_first_int((WINDOW_IN_REFUSAL,), response.text),
                    prompt_tokens=_first_int(PROMPT_IN_REFUSAL, response.text),
                )
            if not response.is_success:
                raise EndpointError(self._answered(response))
            return self._content(response)
        raise EndpointError(f"gave up after {attempts} attempt(s): {reason}")

    def _content(self, response: httpx.Response) -> Completion:
        try:
            body: Any = response.json()
        except ValueError:
            raise EndpointError(self._clean(f"malformed JSON in response: {response.text}")) from None
        try:
            message = body["choices"][0]["message"]
            content = message["content"]
        except (KeyError, IndexError, TypeError):
            raise EndpointError(
                self._clean(f"response has no choices[0].message.content: {response.text}")
            ) from None
        if isinstance(content, str):
            finish = body["choices"][0].get("finish_reason")
            return Completion(
                unicode_text(content),
                _usage(body, "prompt_tokens"),
                _usage(body, "completion_tokens"),
                finish if isinstance(finish, str) else None,
            )
        why = (
            " (it returned tool_calls; SEAL puts the tools in the prompt)"
            if message.get("tool_calls")
            else ""
        )
        raise EndpointError(f"choices[0].message.content is {type(content).__name__}, not text{why}")
