"""Unfinished requests cannot hold the service: a request whose head stalls is answered 408 and its
connection closed after `--head-timeout`, one whose body stalls after `--read-timeout` (an idle kept-alive
connection is not), and past `--max-connections` a request is answered 503 at once; the memory the stalled
bodies held is given back. A head past `--max-head-bytes` is answered 431 before it is kept, and heads
that never end leave room for clients that send theirs. A real uvicorn, configured as `serve` configures
it."""

from __future__ import annotations

import contextlib
import gc
import http.client
import socket
import time
import tracemalloc
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from env_service.app import SPARE_CONNECTIONS, ServiceSettings, uvicorn_options
from seal.env.store import EpisodeStore, StoreSettings
from tests.support.service_thread import service_in_thread

STORE = EpisodeStore(StoreSettings())
"""One store for the module's services: loading the tasks is the slow part, and no test makes an episode."""
PART = 256 * 1024
"""What each stalled client sends of its 1 MB body before it stops."""


@contextlib.contextmanager
def service(**options) -> Iterator[int]:
    """A service on a free loopback port, run as `serve` runs it; yields the port."""
    with service_in_thread(store=STORE, port=0, log_level="error", **options) as url:
        yield urlsplit(url).port


def stalled_body(port: int) -> socket.socket:
    """A connection that sent its headers and part of a 1 MB body, then stopped."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn.sendall(
        b"POST /episodes HTTP/1.1\r\nhost: env\r\ncontent-type: application/json\r\n"
        b"content-length: 1000000\r\n\r\n" + b" " * PART
    )
    return conn


def answer(conn: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := conn.recv(65536):
        received += chunk
    return received


def get_healthz(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: env\r\nconnection: close\r\n\r\n")
        return answer(conn)


def test_a_body_that_stalls_is_answered_408_and_its_connection_closed_after_the_timeout():
    with service(read_timeout_s=1.0) as port, stalled_body(port) as conn:
        started = time.monotonic()
        reply = answer(conn)
        waited = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408 ") and b"request body not received within 1 s" in reply
    assert 0.5 < waited < 20


@pytest.mark.parametrize("sent", [b"", b"POST /episodes HTTP/1.1\r\nhost: env\r\ncontent-le"])
def test_a_head_that_stalls_is_answered_408_and_its_connection_closed_after_the_timeout(sent):
    with service(head_timeout_s=1.0) as port, socket.create_connection(("127.0.0.1", port)) as conn:
        conn.settimeout(30)
        conn.sendall(sent)
        started = time.monotonic()
        reply = answer(conn)
        waited = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.1 408 ") and b"request head not received in time" in reply
    assert 0.5 < waited < 20


def test_an_idle_kept_alive_connection_outlives_the_read_timeout():
    with service(read_timeout_s=0.3) as port:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            for _ in range(2):
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                assert response.status == 200 and response.read()
                time.sleep(0.8)
            conn.request("GET", "/healthz")
            assert conn.getresponse().status == 200
        finally:
            conn.close()


def test_past_the_connection_cap_a_request_is_refused_at_once_and_served_again_after():
    with service(read_timeout_s=60.0, max_connections=4) as port:
        held = [stalled_body(port) for _ in range(4)]
        time.sleep(0.5)
        started = time.monotonic()
        refused = get_healthz(port)
        assert refused.startswith(b"HTTP/1.1 503 ") and time.monotonic() - started < 10
        for conn in held:
            conn.close()
        time.sleep(0.5)
        assert get_healthz(port).startswith(b"HTTP/1.1 200 ")


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_the_memory_stalled_bodies_held_is_given_back_when_they_are_cut_off():
    with service(read_timeout_s=1.5, max_connections=64) as port:
        tracemalloc.start()
        try:
            gc.collect()
            baseline = tracemalloc.get_traced_memory()[0]
            held = [stalled_body(port) for _ in range(16)]
            time.sleep(0.5)
            holding = tracemalloc.get_traced_memory()[0] - baseline
            replies = [answer(conn) for conn in held]
            for conn in held:
                conn.close()
            gc.collect()
            after = tracemalloc.get_traced_memory()[0] - baseline
        finally:
            tracemalloc.stop()
    assert all(reply.startswith(b"HTTP/1.1 408 ") for reply in replies)
    assert holding > 8 * PART  # the bodies were held while they arrived ...
    assert after < 2 * PART  # ... and let go with their connections


def test_the_default_cap_leaves_room_for_a_request_on_every_open_episode():
    assert ServiceSettings.from_options(max_episodes=700).connection_limit == 700 + SPARE_CONNECTIONS
    assert ServiceSettings.from_options(max_connections=5).connection_limit == 5
    assert (
        uvicorn_options(ServiceSettings())["limit_concurrency"]
        == STORE.settings.max_episodes + SPARE_CONNECTIONS
    )


def test_a_head_past_its_limit_is_answered_431_and_closed_before_it_is_kept():
    """8 MB of header fields, sent as a client would; the service stops reading at the limit."""
    field = b"x-padding: " + b"a" * 8190 + b"\r\n"
    with service(max_head_bytes=65_536) as port:
        tracemalloc.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
                conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: env\r\n")
                with contextlib.suppress(OSError):  # the service closes the connection while we send
                    for _ in range(1024):
                        conn.sendall(field)
                reply = answer(conn)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert get_healthz(port).startswith(b"HTTP/1.1 200 ")
    assert reply.startswith(b"HTTP/1.1 431 ") and b"request head too large" in reply
    assert peak < 2 << 20  # the 8 MB were never held


def test_a_head_within_its_limit_with_a_body_in_the_same_packet_is_served():
    """Only the head counts against its limit, however the bytes arrive."""
    body = b'{"task_id": "multi_turn_base_0", "mode": "train"' + b" " * 200_000 + b"}"
    with (
        service(max_head_bytes=1024) as port,
        socket.create_connection(("127.0.0.1", port), timeout=30) as conn,
    ):
        conn.sendall(
            b"POST /episodes?x=1 HTTP/1.1\r\nhost: env\r\nconnection: close\r\ncontent-type: "
            b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        reply = answer(conn)
    assert not reply.startswith(b"HTTP/1.1 431 ") and reply.startswith(b"HTTP/1.1 ")


def test_slow_heads_leave_room_for_clients_that_send_theirs():
    """Twice as many never-ending heads as the cap: the oldest are closed to make room, none counts as
    served, and health checks are answered among them."""
    with service(max_connections=8, head_timeout_s=60.0) as port:
        slow = []
        for _ in range(16):
            conn = socket.create_connection(("127.0.0.1", port), timeout=30)
            conn.sendall(b"GET /healthz HTTP/1.1\r\nhost: env\r\n")
            slow.append(conn)
        time.sleep(0.3)
        answers = [get_healthz(port) for _ in range(5)]
        evicted = [answer(conn) for conn in slow[:8]]
        for conn in slow:
            conn.close()
    assert all(reply.startswith(b"HTTP/1.1 200 ") for reply in answers), answers
    assert all(reply.startswith(b"HTTP/1.1 408 ") for reply in evicted)


@pytest.mark.parametrize(
    "options",
    [{"max_connections": -1}, {"read_timeout_s": 0.0}, {"head_timeout_s": 0.0}, {"max_head_bytes": 0}],
)
def test_a_bad_limit_is_refused_in_one_line(options):
    with pytest.raises(ValueError) as refused:
        ServiceSettings.from_options(**options)
    assert "\n" not in str(refused.value) and next(iter(options)) in str(refused.value)
