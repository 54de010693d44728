"""A time limit on a request's head, which uvicorn does not have.

uvicorn bounds the time an idle connection is kept between requests, not the time a request's head may
take: a client that opens a connection (or starts its next request) and then stops before the head ends is
held forever, and such connections count against the connection cap (`--max-connections`) until every
other client is refused. `BoundedHead` is uvicorn's httptools protocol (the one `http="auto"` picks) that
answers such a connection 408 and closes it `timeout` seconds after its first byte or its opening. The body
that follows the head is bounded by `BodyLimitMiddleware`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_DETAIL = b'{"detail": "request head not received in time"}'
OVERDUE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_DETAIL), _DETAIL)
)


class BoundedHead(HttpToolsProtocol):
    """uvicorn's httptools protocol, with at most `timeout` seconds for each request's head."""

    def __init__(self, *args: Any, timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.head_timeout = timeout
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._start_head_timer()  # the first byte of a following request
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout, self._head_overdue)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_overdue(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.write(OVERDUE)
            self.transport.close()
