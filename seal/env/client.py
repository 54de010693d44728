"""One `EnvClient` interface to the environment service: over HTTP, or in-process without a server.

Both implementations return the same JSON-shaped data and raise the same typed errors, so agent
loops, tools and tests can switch between a remote service and a local `EpisodeStore` freely.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast, runtime_checkable
from urllib.parse import quote

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from seal.connection import is_refused, refused_at
from seal.env import wire
from seal.env.action_limit import kept_action
from seal.env.auth import TOKEN_HEADER, token_from_environment
from seal.env.episode import EpisodeResult
from seal.env.store import EpisodeStore, StoreError, one_line
from seal.protocol.representable import unicode_text
from seal.urls import masked_url, split_credentials

T = TypeVar("T")
SERVICE = "the environment service (`seal serve`, or the launcher's)"
"""What a refused connection asks to check."""


class EnvServiceError(Exception):
    """The service refused a request: `status` is its HTTP code, `reason` its one-line `detail`."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = one_line(reason)
        super().__init__(f"{status}: {self.reason}")


class EnvUnavailableError(EnvServiceError):
    """The service could not be reached, or did not answer, within the client's timeout."""

    def __init__(self, reason: str) -> None:
        super().__init__(503, reason)


@runtime_checkable
class EnvClient(Protocol):
    """What an agent loop needs from the environment (docs/design.md §3.5)."""

    async def create_episode(
        self, task_id: str, mode: str, protocol: str | None = None
    ) -> dict[str, Any]: ...

    async def step(self, episode_id: str, action: str) -> dict[str, Any]: ...

    async def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult: ...

    async def delete(self, episode_id: str) -> None: ...

    async def get_interface(self) -> dict[str, Any]: ...

    async def put_profile(self, profile: dict[str, Any], version: int | None = None) -> dict[str, Any]: ...

    async def put_interface(self, omega: dict[str, Any]) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...

    async def list_tasks(self, split: str = "all") -> list[str]: ...


class HttpEnvClient:
    """Async httpx client with its own connection pool in every event loop that uses it.

    verl runs agent loops on several event loops (one per worker, in several processes); connections
    are bound to the loop that opened them, so each running loop gets its own client. Requests go
    through httpx's transport extension point to aiohttp's connection pool: with httpx's default
    transport the client spent 1.0-2.0 ms of CPU per request at 32 concurrent sessions (its pool
    bookkeeping grows with the number of connections), with aiohttp's 0.7 ms, and on a 2-core
    machine that shares the CPU with the service this decides the throughput.
    Proxies from the environment are ignored (`trust_env=False`): the service is local to the
    cluster. Every call is bounded by `timeout` in total. Only requests that cannot have reached the
    server (refused or timed-out connects) are retried, with exponential backoff, at most `retries`
    times; a GET is also retried after a broken connection, because reading twice changes nothing.
    Every request carries `token` (default `$SEAL_ENV_TOKEN`), which a service bound beyond loopback
    requires (seal/env/auth.py); a user:password in `base_url` (a proxy in front of the service) is sent as
    HTTP Basic auth and shown masked in errors.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8082",
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.1,
        max_connections: int = 256,
        token: str | None = None,
    ) -> None:
        if timeout <= 0 or retries < 0 or backoff < 0 or max_connections < 1:
            raise ValueError("timeout and max_connections must be positive, retries and backoff non-negative")
        self.base_url, self.basic_auth = split_credentials(base_url.rstrip("/"))
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_connections = max_connections
        self.token = token if token is not None else token_from_environment()
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the loop-bound clients: Ray ships clients to worker processes."""
        return {**self.__dict__, "_clients": {}}

    async def __aenter__(self) -> HttpEnvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the current loop's connections (other loops' close with their loops)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for stale in [other for other in self._clients if other.is_closed()]:
                del self._clients[stale]
            limits = httpx.Limits(max_connections=self.max_connections)
            client = self._clients[loop] = httpx.AsyncClient(
                base_url=self.base_url,
                timeout=self.timeout,
                trust_env=False,
                transport=AiohttpTransport(trust_env=False, limits=limits),
                headers={TOKEN_HEADER: self.token} if self.token else None,
                auth=self.basic_auth,
            )
        return client

    async def _request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        attempt = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._client().request(method, path, json=body, params=params)
                break
            except httpx.TransportError as exc:
                if method != "GET" and not _never_sent(exc):
                    raise EnvUnavailableError(f"{method} {path}: connection lost ({_describe(exc)})") from exc
                error: Exception = exc
            except TimeoutError as exc:
                raise EnvUnavailableError(f"{method} {path}: no answer within {self.timeout:g} s") from exc
            attempt += 1
            delay = self.backoff * 2 ** (attempt - 1)
            if attempt > self.retries or loop.time() + delay >= deadline:
                where = f"{method} {masked_url(self.base_url)}{path}"
                if is_refused(error):
                    raise EnvUnavailableError(
                        f"{where}: {refused_at(masked_url(self.base_url), SERVICE)} ({attempt} attempt(s))"
                    ) from error
                raise EnvUnavailableError(
                    f"{where}: unreachable after {attempt} attempt(s) ({_describe(error)})"
                ) from error
            await asyncio.sleep(delay)
        if response.status_code >= 400:
            raise EnvServiceError(response.status_code, _reason(response))
        return wire.loads(response.content) if response.content else None

    async def create_episode(self, task_id: str, mode: str, protocol: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"task_id": task_id, "mode": mode}
        if protocol is not None:
            body["protocol"] = protocol
        return await self._request("POST", "/episodes", body)

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        """The action is sent as Unicode text, as the episode reads it (a lone surrogate, which has no
        UTF-8 form and which the service refuses as a malformed body, becomes U+FFFD); of an over-long one
        only the part the episode keeps is sent (seal/env/action_limit.py): any generation fits a body."""
        body = {"action": unicode_text(kept_action(action))}
        return await self._request("POST", f"/episodes/{_segment(episode_id)}/step", body)

    async def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult:
        params = {"close": "true"} if close else {}
        if cut is not None:
            params["cut"] = cut
        path = f"/episodes/{_segment(episode_id)}/finish"
        return EpisodeResult.from_json(await self._request("POST", path, params=params or None))

    async def delete(self, episode_id: str) -> None:
        await self._request("DELETE", f"/episodes/{_segment(episode_id)}")

    async def get_interface(self) -> dict[str, Any]:
        return await self._request("GET", "/interface")

    async def put_profile(self, profile: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        body = {"profile": profile} if version is None else {"profile": profile, "version": version}
        return await self._request("PUT", "/interface/profile", body)

    async def put_interface(self, omega: dict[str, Any]) -> dict[str, Any]:
        return await self._request("PUT", "/interface/state", omega)

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/healthz")

    async def list_tasks(self, split: str = "all") -> list[str]:
        return (await self._request("GET", "/tasks", params={"split": split}))["task_ids"]


class InProcessEnvClient:
    """The same interface on an `EpisodeStore` in this process: no server, same data, same errors.

    Results go through the service's JSON rendering (`seal.env.wire`), so callers see exactly what HTTP
    would give them (lists, string keys) and cannot mutate the store's state through a returned object.
    """

    def __init__(self, store: EpisodeStore | None = None) -> None:
        self.store = store if store is not None else EpisodeStore()

    @staticmethod
    def _call(function: Callable[..., Any], *args: Any) -> Any:
        try:
            value = function(*args)
        except StoreError as exc:
            raise EnvServiceError(exc.status, exc.reason) from None
        return wire.round_trip(value) if value is not None else None

    async def create_episode(self, task_id: str, mode: str, protocol: str | None = None) -> dict[str, Any]:
        return self._call(lambda: self.store.create(task_id, mode, protocol)._asdict())

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        return self._call(self.store.step, episode_id, action)

    async def finish(self, episode_id: str, close: bool = False, cut: str | None = None) -> EpisodeResult:
        return EpisodeResult.from_json(
            self._call(lambda: self.store.finish(episode_id, close, cut).to_json())
        )

    async def delete(self, episode_id: str) -> None:
        self._call(self.store.delete, episode_id)

    async def get_interface(self) -> dict[str, Any]:
        return self._call(self.store.interface_json)

    async def put_profile(self, profile: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        return self._call(self.store.update_profile, profile, version)

    async def put_interface(self, omega: dict[str, Any]) -> dict[str, Any]:
        return self._call(self.store.put_interface, omega)

    async def health(self) -> dict[str, Any]:
        return self._call(self.store.health)

    async def list_tasks(self, split: str = "all") -> list[str]:
        return self._call(self.store.list_tasks, split)


class EpisodeSession:
    """One episode as an async context manager: the one place that owns the clean-up policy.

    Entering creates the episode (`messages` are its opening messages); leaving normally finishes
    and closes it in one request (truncated by `cut` when a limit of the player ended it) and keeps the
    `result`; leaving by an exception or a cancellation deletes it, best effort, and lets the exception
    through. `env_seconds` is the time spent waiting for the service, for the caller's accounting.
    """

    def __init__(self, client: EnvClient, task_id: str, mode: str, protocol: str | None = None) -> None:
        self.client = client
        self.task_id = task_id
        self.mode = mode
        self.protocol = protocol
        self.episode_id: str | None = None
        self.messages: list[dict[str, str]] = []
        self.interface_version = -1
        self.result: EpisodeResult | None = None
        self.cut: str | None = None
        """Set by whoever plays the episode when a limit of its own ended it (seal.env.driver)."""
        self.env_seconds = 0.0

    async def _timed(self, call: Awaitable[T]) -> T:
        start = time.perf_counter()
        try:
            return await call
        finally:
            self.env_seconds += time.perf_counter() - start

    async def __aenter__(self) -> EpisodeSession:
        created = await self._timed(self.client.create_episode(self.task_id, self.mode, self.protocol))
        self.episode_id = created["episode_id"]
        self.messages = created["messages"]
        self.interface_version = created["interface_version"]
        return self

    async def step(self, action: str) -> dict[str, Any]:
        """`{observation, done, info}` for one assistant message."""
        return await self._timed(self.client.step(cast(str, self.episode_id), action))

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        episode_id = cast(str, self.episode_id)
        if exc_type is None:
            try:
                self.result = await self._timed(self.client.finish(episode_id, close=True, cut=self.cut))
                return
            except BaseException:
                await self._discard(episode_id)
                raise
        await self._discard(episode_id)

    async def _discard(self, episode_id: str) -> None:
        with contextlib.suppress(EnvServiceError):
            await self._timed(self.client.delete(episode_id))


def open_episode(client: EnvClient, task_id: str, mode: str, protocol: str | None = None) -> EpisodeSession:
    """`async with open_episode(client, task_id, mode) as episode:` step it; `episode.result` after."""
    return EpisodeSession(client, task_id, mode, protocol)


def _never_sent(exc: httpx.TransportError) -> bool:
    """True when the connection was never made, so the request cannot have reached the server.

    The aiohttp transport maps every connection-level aiohttp error to httpx.ConnectTimeout, a lost
    connection included; the aiohttp error it was raised from tells the cases apart.
    """
    return isinstance(exc.__cause__, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError)


def _segment(episode_id: str) -> str:
    """An id as one path segment, so an id with '/' or '?' still names an (unknown) episode."""
    return quote(episode_id, safe="")


def _reason(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail is not None else response.text[:200] or response.reason_phrase


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
