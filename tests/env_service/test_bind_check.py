"""The service's host: every spelling of loopback is loopback (no token), an IPv4-mapped address is refused
in one line before anything starts, and the bind check passes exactly where uvicorn can then listen."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import uvicorn

from env_service.app import BindError, ServiceSettings, check_bindable
from seal.env.auth import TOKEN_ENV, is_loopback

ROOT = Path(__file__).resolve().parents[2]
LOOPBACK = ["127.0.0.1", "127.0.0.2", "127.1", "0x7f.1", "::1", "0:0:0:0:0:0:0:1", "localhost", "LocalHost"]
BEYOND = ["0.0.0.0", "::", "10.0.0.7", "head-node", "::ffff:10.0.0.1"]
MAPPED = ["::ffff:127.0.0.1", "::ffff:7f00:1"]


@pytest.fixture(autouse=True)
def no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOKEN_ENV, raising=False)


@pytest.mark.parametrize("host", LOOPBACK)
def test_every_spelling_of_loopback_is_loopback(host):
    assert is_loopback(host)
    assert ServiceSettings(host=host).required_token() is None


@pytest.mark.parametrize("host", BEYOND)
def test_other_hosts_are_not_loopback(host):
    assert not is_loopback(host)


@pytest.mark.parametrize("host", MAPPED)
def test_an_ipv4_mapped_address_is_refused_in_one_line_with_the_spelling_that_works(host):
    assert is_loopback(host)
    with pytest.raises(ValueError) as refused:
        ServiceSettings(host=host)
    message = str(refused.value)
    assert "\n" not in message and "IPv4-mapped" in message and message.endswith("--host 127.0.0.1")


def test_seal_serve_refuses_an_ipv4_mapped_host_before_starting():
    done = subprocess.run(
        [sys.executable, "-m", "seal.cli", "serve", "--host", "::ffff:127.0.0.1", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "IPv4-mapped" in line and "Traceback" not in done.stderr


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


async def empty_app(scope, receive, send) -> None:  # never called: the server only binds
    raise AssertionError("no request is sent")


def uvicorn_listens(host: str, port: int) -> bool:
    """Whether uvicorn's server starts listening on `host:port` (it exits 1 when it cannot bind)."""
    config = uvicorn.Config(empty_app, host=host, port=port, log_level="critical", lifespan="off")
    server = uvicorn.Server(config)

    async def start() -> bool:
        config.load()
        server.lifespan = config.lifespan_class(config)  # what `Server.serve` sets before `startup`
        try:
            await server.startup()
        except SystemExit:
            return False
        await server.shutdown()
        return True

    return asyncio.run(start())


@pytest.mark.parametrize("host", [*LOOPBACK, *MAPPED, "localhost.", "[::1]"])
def test_the_bind_check_passes_exactly_where_uvicorn_listens(host):
    port = free_port()
    try:
        check_bindable(host, port)
        checked = True
    except BindError as refused:
        assert "\n" not in str(refused)
        checked = False
    assert checked == uvicorn_listens(host, port)
    if host in MAPPED:
        assert not checked
