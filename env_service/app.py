"""The BFCL environment service (docs/design.md §3.5): FastAPI routes that only translate to `EpisodeStore`.

Every refusal is a `{"detail": "<one line>"}` with the documented status; bodies are size-checked
before they are read into a parser, then validated strictly. Episode work is CPU-bound and runs on
the event loop, the expensive calls through `HeavyLane` (see env_service/lanes.py for why); the steps
and finish of an episode whose calls have cost more than the ground truth's ever do (`EpisodeStore.heavy`,
seal/env/budget.py) run in a worker thread, so they cannot stall the loop that answers other episodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import gc
import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from env_service.head_timeout import BoundedHead
from env_service.lanes import HeavyLane
from env_service.metrics import ServiceMetrics
from env_service.middleware import ACCESS_LOG, AccessMiddleware, BodyLimitMiddleware, TokenMiddleware
from env_service.models import (
    Created,
    CreateEpisode,
    Error,
    Finished,
    Health,
    InterfaceOut,
    InterfaceState,
    ProfileUpdate,
    StepAction,
    Stepped,
    TaskList,
    describe,
    parse_body,
    request_body,
)
from seal.env import wire
from seal.env.auth import TOKEN_ENV, TOKEN_HEADER, ip_literal, is_loopback, token_from_environment
from seal.env.budget import ToolBudget, start_call_workers
from seal.env.context_limits import CUTS
from seal.env.store import EpisodeStore, StoreError, StoreSettings, one_line
from seal.flags import setting

LOG = logging.getLogger("env_service")
LOG_LEVELS = ("debug", "info", "warning", "error")
PROFILE_BODY = (
    '{"failure_profile": {"version": 1, "window": S, "total": S}, "version"?: int} with '
    "S = {trajectories, labels, reward_sum, by_category}: C_t's counts"
)
"""What `PUT /interface/profile` takes, said in its refusals (the label shares of `finish` are not it)."""
KEEP_ALIVE_S = 75
"""Longer than clients keep idle connections (httpx: 5 s), so the client, not the server, closes them:
a request sent on a connection the server is closing at that moment fails, and cannot be retried."""
SPARE_CONNECTIONS = 64
"""Connections the default cap allows beyond the open-episode limit: health checks, Ω, a client's spares."""
STEP_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""Threads that may run steps and finishes at once (`asyncio.to_thread`'s executor, its default size): the
service starts as many call workers (seal/bfcl/call_deadline.py) before it serves."""
Cut = Literal[CUTS[1:]]  # type: ignore[valid-type]
"""`finish`'s `cut`: the limits of a player that can end an unfinished episode (seal.env.driver)."""


@dataclass(frozen=True)
class ServiceSettings:
    """Everything the service is started with: the one definition of its options and defaults.

    `seal serve` and `python -m env_service` generate their flags from these fields and the
    store's (`seal.flags.add_flags(parser, ServiceSettings)`), so the two commands cannot drift.
    """

    host: str = setting("127.0.0.1", "bind address (loopback only unless told otherwise)")
    port: int = setting(8082, "TCP port")
    log_level: str = setting("info", "service log level (JSON lines on stderr)", choices=LOG_LEVELS)
    max_body_bytes: int = setting(1 << 20, "request body limit (413 beyond it)")
    read_timeout_s: float = setting(
        30.0,
        "seconds a request's body may take to arrive after its head (408 and the connection closed beyond "
        "it)",
        flag="--read-timeout",
    )
    head_timeout_s: float = setting(
        5.0,
        "seconds a request's head may take to arrive after the connection opens or its first byte (408 and "
        "the connection closed beyond it)",
        flag="--head-timeout",
    )
    max_head_bytes: int = setting(
        65_536,
        "bytes a request's head (request line and header fields) may have: a longer one is answered 431 and "
        "its connection closed before it is kept",
    )
    max_connections: int = setting(
        0,
        "connections served at once: a request on one more is answered 503 and its connection closed, so "
        "unfinished requests hold at most this many bodies; as many more may wait for their heads (one past "
        "that closes the oldest) "
        f"(0: the open-episode limit + {SPARE_CONNECTIONS})",
    )
    reap_interval_s: float = setting(30.0, "seconds between idle-episode sweeps", flag="--reap-interval")
    store: StoreSettings = field(default_factory=StoreSettings)

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.max_connections < 0:
            raise ValueError("max_body_bytes must be positive and max_connections not negative")
        if (
            min(self.reap_interval_s, self.read_timeout_s, self.head_timeout_s) <= 0
            or self.max_head_bytes < 1
        ):
            raise ValueError(
                "reap_interval_s, read_timeout_s, head_timeout_s and max_head_bytes must be positive"
            )
        if not 0 <= self.port < 1 << 16:
            raise ValueError(f"port must be 0 to 65535, got {self.port}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {self.log_level!r} (expected {', '.join(LOG_LEVELS)})")
        mapped = getattr(ip_literal(self.host), "ipv4_mapped", None)
        if mapped is not None:
            raise ValueError(
                f"--host {self.host} is an IPv4-mapped IPv6 address, which the service's IPv6-only socket "
                f"cannot listen on: write it --host {mapped}"
            )
        self.required_token()

    @property
    def connection_limit(self) -> int:
        """`max_connections`, or by default room for a request on every open episode and the rest (health,
        Ω): a client never needs more connections than episodes it is stepping at once."""
        return self.max_connections or self.store.max_episodes + SPARE_CONNECTIONS

    def required_token(self) -> str | None:
        """The token every request must carry: none on loopback; beyond it `$SEAL_ENV_TOKEN`, whose
        absence is a one-line ValueError, so such a service refuses to start rather than run open."""
        if is_loopback(self.host):
            return None
        token = token_from_environment()
        if token is None:
            raise ValueError(
                f"--host {self.host} serves beyond loopback: set {TOKEN_ENV} to a shared token "
                f"(clients send it in the {TOKEN_HEADER} header)"
            )
        return token

    @classmethod
    def from_options(cls, **options: Any) -> ServiceSettings:
        """Flat keyword options (as `serve` and the CLI take them), split between store and service."""
        budget_fields = {f.name for f in dataclasses.fields(ToolBudget)}
        store_fields = {f.name for f in dataclasses.fields(StoreSettings)} - {"budget"}
        own_fields = {f.name for f in dataclasses.fields(cls)} - {"store"}
        unknown = sorted(set(options) - budget_fields - store_fields - own_fields)
        if unknown:
            raise TypeError(f"unknown service setting(s): {', '.join(unknown)}")
        budget = ToolBudget(**{k: v for k, v in options.items() if k in budget_fields})
        store = StoreSettings(budget=budget, **{k: v for k, v in options.items() if k in store_fields})
        return cls(store=store, **{k: v for k, v in options.items() if k in own_fields})


class BindError(RuntimeError):
    """The service cannot listen where it was told to; the message is one line."""


class FastJSONResponse(JSONResponse):
    """JSON rendered by orjson (`seal.env.wire`): create and finish bodies (a 25 kB prompt, per-turn
    evidence) are large, and the standard library's encoder was a tenth of the service's CPU under load.
    Whatever the store answers renders: no 500 after a step was applied."""

    def render(self, content: Any) -> bytes:
        return wire.dumps(content)


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": Error} for status in statuses}


def create_app(settings: ServiceSettings | None = None, store: EpisodeStore | None = None) -> FastAPI:
    """A fresh app with its own store (unless one is given), metrics registry and reaper task."""
    settings = settings or ServiceSettings()
    store = store if store is not None else EpisodeStore(settings.store)
    metrics = ServiceMetrics(store)
    heavy = HeavyLane()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(_reap_forever(store, settings.reap_interval_s))
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper

    app = FastAPI(
        title="SEAL BFCL environment service",
        version="1.3",
        description="Episodes of the 800 BFCL V3 multi-turn tasks, and the training interface Ω.",
        lifespan=lifespan,
    )
    app.state.store = store
    app.state.metrics = metrics
    app.state.settings = settings

    @app.exception_handler(StoreError)
    async def refused(_: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": exc.reason}, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": one_line(describe(list(exc.errors())))}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(
            {"detail": one_line(str(exc.detail))}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        LOG.exception("unhandled error on %s %s", request.method, request.url.path)
        # uvicorn drops the connection after an unhandled error: say so, or a client's pool reuses it and
        # the next request on it (another episode's) fails.
        return JSONResponse(
            {"detail": f"internal error: {type(exc).__name__}"},
            status_code=500,
            headers={"connection": "close"},
        )

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> JSONResponse:
        return FastJSONResponse(store.health())

    @app.get("/tasks", response_model=TaskList, responses=_errors(422), tags=["service"])
    async def tasks(split: Literal["train", "val", "test", "all"] = "all") -> JSONResponse:
        ids = store.list_tasks(split)
        return FastJSONResponse({"split": split, "count": len(ids), "task_ids": ids})

    @app.post(
        "/episodes",
        status_code=201,
        response_model=Created,
        responses=_errors(404, 413, 422, 429),
        openapi_extra=request_body(CreateEpisode),
        tags=["episodes"],
    )
    async def create_episode(request: Request) -> JSONResponse:
        body = parse_body(CreateEpisode, await request.body())
        created = await heavy.run(store.create, body.task_id, body.mode, body.protocol)
        request.state.episode_id = created.episode_id
        return FastJSONResponse(
            created._asdict(), status_code=201, headers={"location": f"/episodes/{created.episode_id}"}
        )

    @app.post(
        "/episodes/{episode_id}/step",
        response_model=Stepped,
        responses=_errors(404, 409, 413, 422),
        openapi_extra=request_body(StepAction),
        tags=["episodes"],
    )
    async def step(episode_id: str, request: Request) -> JSONResponse:
        body = parse_body(StepAction, await request.body())
        if store.heavy(episode_id, body.action):
            return FastJSONResponse(await asyncio.to_thread(store.step, episode_id, body.action))
        return FastJSONResponse(store.step(episode_id, body.action))

    @app.post(
        "/episodes/{episode_id}/finish",
        response_model=Finished,
        responses=_errors(404, 422),
        tags=["episodes"],
    )
    async def finish(episode_id: str, close: bool = False, cut: Cut | None = None) -> JSONResponse:
        """Score the episode; `close=true` also deletes it (one round trip fewer per episode); `cut` (calls,
        context or generation) truncates an unfinished episode first, as the player's limit ended it."""
        if store.heavy(episode_id):
            return FastJSONResponse(await asyncio.to_thread(store.finish, episode_id, close, cut))
        return FastJSONResponse(await heavy.run(store.finish, episode_id, close, cut))

    @app.delete("/episodes/{episode_id}", status_code=204, responses=_errors(404), tags=["episodes"])
    async def delete(episode_id: str) -> Response:
        store.delete(episode_id)
        return Response(status_code=204)

    @app.get("/interface", response_model=InterfaceOut, tags=["interface"])
    async def interface() -> JSONResponse:
        return FastJSONResponse(store.interface_json())

    @app.put(
        "/interface/state",
        response_model=InterfaceOut,
        responses=_errors(409, 413, 422),
        openapi_extra=request_body(InterfaceState),
        tags=["interface"],
    )
    async def put_interface(request: Request) -> JSONResponse:
        """Serve exactly this Ω (a resumed run's). 422: not the schema's; 409: a well-formed Ω this service
        cannot serve (another config than its own, guidelines the config does not allow, or a text other
        than the one they render)."""
        body = parse_body(InterfaceState, await request.body())
        return FastJSONResponse(store.put_interface(body.model_dump()))

    @app.put(
        "/interface/profile",
        response_model=InterfaceOut,
        responses=_errors(413, 422),
        openapi_extra=request_body(ProfileUpdate),
        tags=["interface"],
    )
    async def put_profile(request: Request) -> JSONResponse:
        body = parse_body(ProfileUpdate, await request.body(), expected=PROFILE_BODY)
        return FastJSONResponse(store.update_profile(body.failure_profile.model_dump(), body.version))

    @app.get(
        "/metrics",
        response_class=Response,
        tags=["service"],
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes, timeout=settings.read_timeout_s)
    token = settings.required_token()
    if token is not None:
        app.add_middleware(TokenMiddleware, token=token)
    app.add_middleware(AccessMiddleware, observe=metrics.observe, router=app.router)
    return app


async def _reap_forever(store: EpisodeStore, interval: float) -> None:
    """Reaps idle episodes even when no request arrives (requests also reap on access)."""
    while True:
        await asyncio.sleep(interval)
        reaped = store.reap()
        if reaped:
            LOG.info("reaped %d idle episode(s)", reaped)


class JsonLines(logging.Formatter):
    """One JSON object per line: access records are one already, others are wrapped."""

    def format(self, record: logging.LogRecord) -> str:
        if record.name == ACCESS_LOG.name:
            return record.getMessage()
        entry = {"level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str = "info") -> None:
    """The service's log lines (access log included) and uvicorn's as JSON lines on stderr."""
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r} (expected {', '.join(LOG_LEVELS)})")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    for name in ("env_service", "uvicorn"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False


def check_bindable(host: str, port: int) -> None:
    """Bind `host:port` as uvicorn will and let go: a busy port or an address this node cannot listen on is
    refused in one line before the tasks load, where uvicorn would fail only after announcing a start-up
    that never ends. Like uvicorn's server (asyncio's `create_server`), every address `host` resolves to is
    bound, with address reuse on and IPv6 sockets IPv6-only."""
    if port == 0:
        return
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BindError(f"cannot listen on host {host!r}: {exc.strerror}") from None
    with contextlib.ExitStack() as held:
        for family, kind, proto, _, address in dict.fromkeys(addresses):
            sock = held.enter_context(socket.socket(family, kind, proto))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise BindError(f"port {port} on {host} is in use; choose another with --port") from None
                raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def serve(settings: ServiceSettings | None = None) -> None:
    """Run the service with uvicorn until interrupted; BindError when it cannot listen at host:port."""
    settings = settings or ServiceSettings()
    configure_logging(settings.log_level)
    check_bindable(settings.host, settings.port)
    app = create_app(settings)
    # The 800 loaded tasks are ~170k objects that live as long as the process: freezing them keeps
    # every full garbage collection from walking them (a 75 ms pause, seen in the latency tail).
    gc.freeze()
    start_call_workers(STEP_THREADS)
    LOG.info("serving %d tasks on http://%s:%d", app.state.store.task_count, settings.host, settings.port)
    uvicorn.run(app, **uvicorn_options(settings))


def uvicorn_options(settings: ServiceSettings) -> dict[str, Any]:
    """uvicorn's settings for the service: its own JSON log lines (no uvicorn access log), idle connections
    kept longer than clients keep them, at most `connection_limit` served at once (a request on one more is
    answered 503 and its connection closed) and as many waiting for their heads, each head bounded in time
    and size (`BoundedHead`; the body's time is `BodyLimitMiddleware`'s)."""
    return {
        "http": functools.partial(
            BoundedHead,
            timeout=settings.head_timeout_s,
            max_bytes=settings.max_head_bytes,
            max_pending=settings.connection_limit,
        ),
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "log_config": None,
        "access_log": False,
        "lifespan": "on",
        "timeout_keep_alive": KEEP_ALIVE_S,
        "limit_concurrency": settings.connection_limit,
    }
