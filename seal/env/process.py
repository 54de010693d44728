"""The environment service as a child process: start it on a free loopback port, wait until `/healthz`
answers, and stop it on every way out of the `with` block (return, exception, Ctrl-C).

One helper for everything that needs a real service process: `launcher.py`, `benchmarks/bench_env.py` and
the tests. The child runs in its own session, so a Ctrl-C in the terminal reaches only the parent, which
then stops the child itself (SIGTERM, then SIGKILL after `stop_s`) and waits for it: nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

LOOPBACK = "127.0.0.1"
POLL_S = 0.2


class ServiceStartError(RuntimeError):
    """The service exited or stayed unhealthy while starting; the message is one line."""


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def is_healthy(url: str, timeout_s: float = 2.0) -> bool:
    """Whether a service answers `GET {url}/healthz` with 200 (proxies from the environment ignored)."""
    return health(url, timeout_s) is not None


def health(url: str, timeout_s: float = 2.0) -> dict | None:
    """The body of a 200 answer to `GET {url}/healthz` (empty where it is not a JSON object), or None where
    nothing answers so."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/healthz", timeout=timeout_s, trust_env=False)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def service_command(host: str, port: int, flags: Sequence[str] = ()) -> list[str]:
    """`python -m env_service --host H --port P [flags]` with this interpreter."""
    return [sys.executable, "-m", "env_service", "--host", host, "--port", str(port), *flags]


@dataclass(frozen=True)
class ServiceProcess:
    """A healthy service child: where it answers, its process, and where its output goes."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path | None

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def running_service(
    flags: Sequence[str] = (),
    *,
    host: str = LOOPBACK,
    port: int | None = None,
    log_path: Path | None = None,
    startup_s: float = 120.0,
    stop_s: float = 10.0,
) -> Iterator[ServiceProcess]:
    """A fresh `python -m env_service` child, healthy inside the block and stopped after it.

    `flags` are further service options (`--taxonomy paper`, ...); `port` defaults to a free one;
    the child's stdout and stderr are appended to `log_path` (a temporary file when None).
    Raises `ServiceStartError` when the child exits or is not healthy within `startup_s`.
    """
    port = free_port(host) if port is None else port
    url = f"http://{host}:{port}"
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a+b") if log_path is not None else tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            service_command(host, port, flags),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            _wait_healthy(url, process, log, startup_s, log_path)
            yield ServiceProcess(url, process, log_path)
        finally:
            stop(process, stop_s)


def stop(process: subprocess.Popen[bytes], stop_s: float = 10.0) -> None:
    """SIGTERM to the child's process group (uvicorn shuts down gracefully), SIGKILL after `stop_s`;
    returns once the child is reaped. Safe to call on a child that already exited."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(stop_s)
            return
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _last_line(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0, os.SEEK_END)
    log.seek(max(0, log.tell() - 4096))
    lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _wait_healthy(
    url: str, process: subprocess.Popen[bytes], log: IO[bytes], startup_s: float, log_path: Path | None
) -> None:
    where = f" (log: {log_path})" if log_path is not None else ""
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ServiceStartError(
                f"environment service exited with code {process.returncode} while starting: "
                f"{_last_line(log)}{where}"
            )
        answer = health(url, timeout_s=1.0)
        if answer is not None and answer.get("pid") == process.pid:
            return
        if answer is not None:
            raise ServiceStartError(
                f"another service (pid {answer.get('pid', 'unknown')}) answers at {url}: the port was taken "
                f"while this one started; start again{where}"
            )
        time.sleep(POLL_S)
    raise ServiceStartError(f"environment service at {url} not healthy within {startup_s:g} s{where}")
