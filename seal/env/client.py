"""One `EnvClient` interface to the environment service: over HTTP, or in-process without a server.

Both implementations return the same JSON-shaped data and raise the same typed errors, so agent
loops, tools and tests can switch between a remote service and a local `EpisodeStore` freely.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote

import httpx

from seal.env.store import EpisodeStore, StoreError, one_line

POOL_CONNECTIONS = 8


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
    """What an agent loop needs from the environment (DESIGN §3.5)."""

    async def create_episode(self, task_id: str, mode: str, format: str | None = None) -> dict[str, Any]: ...

    async def step(self, episode_id: str, action: str) -> dict[str, Any]: ...

    async def finish(self, episode_id: str) -> dict[str, Any]: ...

    async def delete(self, episode_id: str) -> None: ...

    async def get_interface(self) -> dict[str, Any]: ...

    async def put_profile(self, profile: dict[str, Any]) -> dict[str, Any]: ...

    async def health(self) -> dict[str, Any]: ...

    async def list_tasks(self, split: str = "all") -> list[str]: ...


class _LoopPools:
    """The connection pools of one event loop.

    httpcore's pool bookkeeping costs O(connections²) per request (it dominated the client's CPU at
    32 connections), so a loop gets several small pools of at most `POOL_CONNECTIONS` connections,
    opened as concurrency needs them, and each request takes the least busy one.
    """

    def __init__(self, make: Callable[[int], httpx.AsyncClient], max_connections: int) -> None:
        self.make = make
        self.per_pool = min(POOL_CONNECTIONS, max_connections)
        self.max_pools = -(-max_connections // self.per_pool)
        self.clients: list[httpx.AsyncClient] = []
        self.busy: list[int] = []

    def _pick(self) -> int:
        if self.clients:
            index = min(range(len(self.clients)), key=self.busy.__getitem__)
            if self.busy[index] < self.per_pool or len(self.clients) >= self.max_pools:
                return index
        self.clients.append(self.make(self.per_pool))
        self.busy.append(0)
        return len(self.clients) - 1

    async def request(
        self, method: str, path: str, body: Any, params: dict[str, str] | None
    ) -> httpx.Response:
        index = self._pick()
        self.busy[index] += 1
        try:
            return await self.clients[index].request(method, path, json=body, params=params)
        finally:
            self.busy[index] -= 1

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


class HttpEnvClient:
    """Async HTTP client with its own connection pools in every event loop that uses it.

    verl runs agent loops on several event loops (one per worker, in several processes); httpx
    connections are bound to the loop that opened them, so each running loop gets its own pools.
    Proxies from the environment are ignored (`trust_env=False`): the service is local to the
    cluster. Every call is bounded by `timeout` in total. Only requests that cannot have reached the
    server (refused or timed-out connects) are retried, with exponential backoff, at most `retries`
    times; a GET is also retried after a broken connection, because reading twice changes nothing.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8082",
        timeout: float = 60.0,
        retries: int = 3,
        backoff: float = 0.1,
        max_connections: int = 256,
    ) -> None:
        if timeout <= 0 or retries < 0 or backoff < 0 or max_connections < 1:
            raise ValueError("timeout and max_connections must be positive, retries and backoff non-negative")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_connections = max_connections
        self._pools: dict[asyncio.AbstractEventLoop, _LoopPools] = {}
        self._ssl: ssl.SSLContext | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without loop-bound pools or the SSL context: Ray ships clients to worker processes."""
        return {**self.__dict__, "_pools": {}, "_ssl": None}

    async def __aenter__(self) -> HttpEnvClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the current loop's connections (other loops' close with their loops)."""
        pools = self._pools.pop(asyncio.get_running_loop(), None)
        if pools is not None:
            await pools.aclose()

    def _make_client(self, connections: int) -> httpx.AsyncClient:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self.timeout,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            trust_env=False,
            verify=self._ssl,
        )

    def _loop_pools(self) -> _LoopPools:
        loop = asyncio.get_running_loop()
        pools = self._pools.get(loop)
        if pools is None:
            for stale in [other for other in self._pools if other.is_closed()]:
                del self._pools[stale]
            pools = self._pools[loop] = _LoopPools(self._make_client, self.max_connections)
        return pools

    async def _request(
        self, method: str, path: str, body: Any = None, params: dict[str, str] | None = None
    ) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        attempt = 0
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    response = await self._loop_pools().request(method, path, body, params)
                break
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                error: Exception = exc
            except httpx.TransportError as exc:
                if method != "GET":
                    raise EnvUnavailableError(f"{method} {path}: connection lost ({_describe(exc)})") from exc
                error = exc
            except TimeoutError as exc:
                raise EnvUnavailableError(f"{method} {path}: no answer within {self.timeout:g} s") from exc
            attempt += 1
            delay = self.backoff * 2 ** (attempt - 1)
            if attempt > self.retries or loop.time() + delay >= deadline:
                raise EnvUnavailableError(
                    f"{method} {self.base_url}{path}: unreachable after {attempt} attempt(s)"
                    f" ({_describe(error)})"
                ) from error
            await asyncio.sleep(delay)
        if response.status_code >= 400:
            raise EnvServiceError(response.status_code, _reason(response))
        return response.json() if response.content else None

    async def create_episode(self, task_id: str, mode: str, format: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"task_id": task_id, "mode": mode}
        if format is not None:
            body["format"] = format
        return await self._request("POST", "/episodes", body)

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        return await self._request("POST", f"/episodes/{_segment(episode_id)}/step", {"action": action})

    async def finish(self, episode_id: str) -> dict[str, Any]:
        return await self._request("POST", f"/episodes/{_segment(episode_id)}/finish")

    async def delete(self, episode_id: str) -> None:
        await self._request("DELETE", f"/episodes/{_segment(episode_id)}")

    async def get_interface(self) -> dict[str, Any]:
        return await self._request("GET", "/interface")

    async def put_profile(self, profile: dict[str, Any]) -> dict[str, Any]:
        return await self._request("PUT", "/interface/profile", {"profile": profile})

    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/healthz")

    async def list_tasks(self, split: str = "all") -> list[str]:
        return (await self._request("GET", "/tasks", params={"split": split}))["task_ids"]


class InProcessEnvClient:
    """The same interface on an `EpisodeStore` in this process: no server, same data, same errors.

    Results go through a JSON round trip, so callers see exactly what HTTP would give them (lists,
    string keys) and cannot mutate the store's state through a returned object.
    """

    def __init__(self, store: EpisodeStore | None = None) -> None:
        self.store = store if store is not None else EpisodeStore()

    @staticmethod
    def _call(function: Callable[..., Any], *args: Any) -> Any:
        try:
            value = function(*args)
        except StoreError as exc:
            raise EnvServiceError(exc.status, exc.reason) from None
        return json.loads(json.dumps(value)) if value is not None else None

    async def create_episode(self, task_id: str, mode: str, format: str | None = None) -> dict[str, Any]:
        return self._call(lambda: self.store.create(task_id, mode, format)._asdict())

    async def step(self, episode_id: str, action: str) -> dict[str, Any]:
        return self._call(self.store.step, episode_id, action)

    async def finish(self, episode_id: str) -> dict[str, Any]:
        return self._call(self.store.finish, episode_id)

    async def delete(self, episode_id: str) -> None:
        self._call(self.store.delete, episode_id)

    async def get_interface(self) -> dict[str, Any]:
        return self._call(self.store.interface_json)

    async def put_profile(self, profile: dict[str, Any]) -> dict[str, Any]:
        return self._call(self.store.update_profile, profile)

    async def health(self) -> dict[str, Any]:
        return self._call(self.store.health)

    async def list_tasks(self, split: str = "all") -> list[str]:
        return self._call(self.store.list_tasks, split)


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
