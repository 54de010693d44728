"""Bounds on a request's head — its time, its size, and the room unfinished heads may take — which uvicorn
does not have.

uvicorn bounds the time an idle connection is kept between requests, not the time a request's head may
take, nor its size: with httptools (the parser `http="auto"` picks) a head of any size is parsed and its
fields kept, so a client could grow the service by megabytes a connection (an 8 MB header was answered
200), and one that stops before its head ends is held and counts against the connection cap until every
other client is refused (600 slow heads answered every other client 503). `BoundedHead` is uvicorn's
httptools protocol with three bounds:

- time: a head must arrive within `timeout` seconds of the connection opening or of its first byte
  (408 and the connection closed);
- size: a head longer than `max_bytes` is answered 431 and its connection closed as soon as its bytes pass
  the limit, before the parser keeps them (whatever the token: the head is refused before it is read);
- room: connections whose head has not arrived take at most `max_pending` places; one more makes room by
  closing the oldest of them (408), and they do not count against uvicorn's cap on connections served
  (`limit_concurrency`), so a client that sends its requests whole is served while slow heads wait.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

HEAD_END = b"\r\n\r\n"


def _answer(status: bytes, detail: bytes) -> bytes:
    return (
        b"HTTP/1.1 %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
        b"content-length: %d\r\n\r\n%s" % (status, len(detail), detail)
    )


OVERDUE = _answer(b"408 Request Timeout", b'{"detail": "request head not received in time"}')
TOO_LARGE = _answer(b"431 Request Header Fields Too Large", b'{"detail": "request head too large"}')


class BoundedHead(HttpToolsProtocol):
    """uvicorn's httptools protocol, with at most `timeout` seconds and `max_bytes` for each request's
    head, and at most `max_pending` connections waiting for one."""

    def __init__(self, *args: Any, timeout: float, max_bytes: int, max_pending: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = timeout
        self.max_head_bytes = max_bytes
        self.max_pending = max_pending
        self._served_limit = self.limit_concurrency
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._head_tail = b""

    @property
    def _pending(self) -> dict[BoundedHead, None]:
        """The server's connections waiting for a head, oldest first."""
        state = self.server_state
        if not hasattr(state, "pending_heads"):
            state.pending_heads = {}  # type: ignore[attr-defined]
        return state.pending_heads  # type: ignore[attr-defined]

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head()

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._start_head()  # the first byte of a following request
        if self._head_timer is not None and self._head_too_large(data):
            self._refuse(TOO_LARGE)
            return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._end_head()
        if self._served_limit is not None:
            # uvicorn's cap counts every connection; those still waiting for a head are not being served
            self.limit_concurrency = self._served_limit + len(self._pending)
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_head()
        super().connection_lost(exc)

    def _head_too_large(self, data: bytes) -> bool:
        """Whether the head, with `data`, passes `max_bytes` (counted up to its end, not the body's bytes)."""
        seen = self._head_tail + data
        end = seen.find(HEAD_END)
        size = self._head_bytes - len(self._head_tail) + (len(seen) if end < 0 else end + len(HEAD_END))
        self._head_bytes = size
        self._head_tail = seen[-(len(HEAD_END) - 1) :]
        return size > self.max_head_bytes

    def _start_head(self) -> None:
        pending = self._pending
        while len(pending) >= self.max_pending:
            next(iter(pending))._refuse(OVERDUE)
        pending[self] = None
        self._head_bytes, self._head_tail = 0, b""
        self._head_timer = self.loop.call_later(self.head_timeout, self._refuse, OVERDUE)

    def _end_head(self) -> None:
        self._pending.pop(self, None)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, answer: bytes) -> None:
        self._end_head()
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()
