"""A real environment service (uvicorn) on a free loopback port, in a thread of the test process."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from env_service.app import ServiceSettings, create_app, uvicorn_options
from seal.env.client import HttpEnvClient
from seal.env.store import EpisodeStore


@contextlib.contextmanager
def service_in_thread(store: EpisodeStore | None = None, **options: Any) -> Iterator[str]:
    """Yield the service's base URL, served as `seal serve` serves it (`uvicorn_options`); `options` are
    `ServiceSettings.from_options` keywords (its log at warning level unless they say), `store` the episodes
    it holds (default: a fresh store)."""
    settings = ServiceSettings.from_options(**{"log_level": "warning", **options})
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(settings, store=store), **uvicorn_options(settings)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
        sock.close()


def served_interface(url: str) -> dict[str, Any]:
    """`GET /interface` of the service at `url`."""

    async def get() -> dict[str, Any]:
        async with HttpEnvClient(url) as client:
            return await client.get_interface()

    return asyncio.run(get())
