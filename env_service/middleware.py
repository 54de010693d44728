"""Small ASGI middlewares: a request-body size limit, the shared token of a service bound beyond
loopback, and per-request metrics plus a JSON access log.

All are plain ASGI (no BaseHTTPMiddleware), so they add no task or copy per request.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from seal.env.auth import TOKEN_HEADER

ACCESS_LOG = logging.getLogger("env_service.access")


async def send_error(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    """413 for a body over `limit` bytes, judged from Content-Length and by counting what arrives; 408 for
    one that has not arrived whole `timeout` seconds after its headers.

    The body is read in full here, before any parsing, and handed on from memory; a body that
    grows past the limit is refused as soon as it does, whatever its Content-Length claimed. A client that
    stalls mid-body is answered and its connection closed when the time is up, so an unfinished request
    holds its memory and its connection for at most `timeout` seconds.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout: float) -> None:
        self.app = app
        self.limit = limit
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await send_error(send, 400, "invalid Content-Length header")
                return
            if int(declared) > self.limit:
                await send_error(send, 413, f"request body over the {self.limit}-byte limit")
                return
        chunks: list[bytes] = []
        size = 0
        more = True
        try:
            async with asyncio.timeout(self.timeout):
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.limit:
                        await send_error(send, 413, f"request body over the {self.limit}-byte limit")
                        return
                    chunks.append(chunk)
                    more = message.get("more_body", False)
        except TimeoutError:
            chunks.clear()
            await send_error(send, 408, f"request body not received within {self.timeout:g} s")
            return
        await self.app(scope, _replay(b"".join(chunks), receive), send)


class TokenMiddleware:
    """401 for a request without the shared token, compared in constant time, before its body is read.

    `GET /healthz` stays open: it reveals only counts, and liveness probes carry no secrets.
    """

    OPEN_PATHS = frozenset({"/healthz"})

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in self.OPEN_PATHS:
            sent = dict(scope["headers"]).get(TOKEN_HEADER.encode(), b"")
            if not hmac.compare_digest(sent, self.expected):
                await send_error(send, 401, f"missing or wrong {TOKEN_HEADER} header")
                return
        await self.app(scope, receive, send)


def _replay(body: bytes, receive: Receive) -> Receive:
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


class AccessMiddleware:
    """Counts and times every request by route template and writes one JSON access-log line."""

    def __init__(self, app: ASGIApp, observe: Callable[[str, str, int, float], None], router: Router) -> None:
        self.app = app
        self.observe = observe
        self.router = router

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500
        state: dict[str, Any] = scope.setdefault("state", {})

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            seconds = time.perf_counter() - start
            route, params = self._route(scope)
            self.observe(route, scope["method"], status, seconds)
            if ACCESS_LOG.isEnabledFor(logging.INFO):
                episode = state.get("episode_id") or params.get("episode_id")
                ACCESS_LOG.info(
                    json.dumps(
                        {
                            "method": scope["method"],
                            "path": scope["path"][:200],
                            "route": route,
                            "status": status,
                            "ms": round(seconds * 1000, 3),
                            "episode_id": episode[:64] if isinstance(episode, str) else None,
                        }
                    )
                )

    def _route(self, scope: Scope) -> tuple[str, dict[str, Any]]:
        """The route's path template (a bounded label set) and path parameters, also for requests
        refused before routing (413)."""
        if "route" in scope:
            return getattr(scope["route"], "path", "unmatched"), scope.get("path_params", {})
        for route in self.router.routes:
            match, child = route.matches(scope)
            if match is not Match.NONE:
                return getattr(route, "path", "unmatched"), child.get("path_params", {})
        return "unmatched", {}
