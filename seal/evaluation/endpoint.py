"""A chat-completions client for any OpenAI-compatible endpoint.

Pooled (one `httpx.AsyncClient` per run, no proxy settings from the environment), with bounded
exponential backoff on what is usually transient (connect errors, timeouts, 408/429/5xx). Anything
else, and a body that is not a chat completion with text content, raises `EndpointError` with a
one-line reason; the runner records it on the episode instead of stopping the run. The API key only
ever lives in the client's request headers, and is masked out of every error message.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

RETRY_STATUS = frozenset({408, 429})
EXCERPT_CHARS = 200


class EndpointError(RuntimeError):
    """The endpoint gave no usable answer: fails the episode that asked, never the run."""


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


class ChatEndpoint:
    """`await endpoint.complete(messages)` -> the assistant's text (temperature 0, no `tools` field:
    the protocol puts the tools in the system prompt)."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 4096,
        timeout: float = 300.0,
        policy: RetryPolicy | None = None,
        max_connections: int = 8,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.policy = policy or RetryPolicy()
        self._secret = api_key or None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            trust_env=False,
        )

    def __repr__(self) -> str:
        return f"ChatEndpoint(url={self.url!r}, model={self.model!r})"

    async def __aenter__(self) -> ChatEndpoint:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.aclose()

    def _clean(self, text: str) -> str:
        """One line, bounded, with the API key masked (a server may echo request headers)."""
        text = " ".join(text.split())
        if self._secret:
            text = text.replace(self._secret, "***")
        return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."

    async def complete(self, messages: list[dict[str, str]]) -> str:
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
        }
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
                reason = self._clean(f"{type(exc).__name__}: {exc}")
                continue
            if response.status_code in RETRY_STATUS or response.status_code >= 500:
                reason = self._clean(f"HTTP {response.status_code}: {response.text}")
                retry_after = _retry_after(response)
                continue
            if not response.is_success:
                raise EndpointError(self._clean(f"HTTP {response.status_code}: {response.text}"))
            return self._content(response)
        raise EndpointError(f"gave up after {attempts} attempt(s): {reason}")

    def _content(self, response: httpx.Response) -> str:
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
            return content
        why = (
            " (it returned tool_calls; SEAL puts the tools in the prompt)"
            if message.get("tool_calls")
            else ""
        )
        raise EndpointError(f"choices[0].message.content is {type(content).__name__}, not text{why}")
