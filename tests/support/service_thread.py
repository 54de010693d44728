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

from env_service.app import ServiceSettings, create_app
from seal.env.client import HttpEnvClient


@contextlib.contextmanager
def service_in_thread(**options: Any) -> Iterator[str]:
    """Yield the service's base URL; `options` are `ServiceSettings.from_options` keywords."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = create_app(ServiceSettings.from_options(**options))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
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


def served_interface(url: str) -> dict[str, Any]:
    """`GET /interface` of the service at `url`."""

    async def get() -> dict[str, Any]:
        async with HttpEnvClient(url) as client:
            return await client.get_interface()

    return asyncio.run(get())
