"""The BFCL environment service (DESIGN §3.5): FastAPI routes that only translate to `EpisodeStore`.

Every refusal is a `{"detail": "<one line>"}` with the documented status; bodies are size-checked
before they are read into a parser, then validated strictly. Episode work is CPU-bound and takes
milliseconds, so it runs on the event loop (see `serve` for the measured numbers behind that).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from env_service.metrics import ServiceMetrics
from env_service.middleware import AccessMiddleware, BodyLimitMiddleware
from env_service.models import (
    Created,
    CreateEpisode,
    Error,
    Finished,
    Health,
    InterfaceOut,
    ProfileUpdate,
    StepAction,
    Stepped,
    TaskList,
    describe,
    parse_body,
    request_body,
)
from seal.env.store import EpisodeStore, StoreError, StoreSettings, one_line

LOG = logging.getLogger("env_service")
LOG_LEVELS = ("debug", "info", "warning", "error")


@dataclass(frozen=True)
class ServiceSettings:
    store: StoreSettings = field(default_factory=StoreSettings)
    max_body_bytes: int = 1 << 20
    offload: bool = False
    reap_interval_s: float = 30.0

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or not self.reap_interval_s > 0:
            raise ValueError("max_body_bytes and reap_interval_s must be positive")

    @classmethod
    def from_options(cls, **options: Any) -> ServiceSettings:
        """Flat keyword options (as `serve` and the CLI take them), split between store and service."""
        store_fields = {f.name for f in dataclasses.fields(StoreSettings)}
        own_fields = {f.name for f in dataclasses.fields(cls)} - {"store"}
        unknown = sorted(set(options) - store_fields - own_fields)
        if unknown:
            raise TypeError(f"unknown service setting(s): {', '.join(unknown)}")
        store = StoreSettings(**{k: v for k, v in options.items() if k in store_fields})
        return cls(store=store, **{k: v for k, v in options.items() if k in own_fields})


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": Error} for status in statuses}


def create_app(settings: ServiceSettings | None = None, store: EpisodeStore | None = None) -> FastAPI:
    """A fresh app with its own store (unless one is given), metrics registry and reaper task."""
    settings = settings or ServiceSettings()
    store = store if store is not None else EpisodeStore(settings.store)
    metrics = ServiceMetrics(store)
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(1) if settings.offload else None

    async def _heavy(fn, *args):
        if pool is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

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
        version="1",
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
        return JSONResponse({"detail": f"internal error: {type(exc).__name__}"}, status_code=500)

    @app.get("/healthz", response_model=Health, tags=["service"])
    async def healthz() -> JSONResponse:
        return JSONResponse(store.health())

    @app.get("/tasks", response_model=TaskList, responses=_errors(422), tags=["service"])
    async def tasks(split: Literal["train", "val", "test", "all"] = "all") -> JSONResponse:
        ids = store.list_tasks(split)
        return JSONResponse({"split": split, "count": len(ids), "task_ids": ids})

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
        created = await _heavy(store.create, body.task_id, body.mode, body.format)
        request.state.episode_id = created.episode_id
        return JSONResponse(
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
        return JSONResponse(store.step(episode_id, body.action))

    @app.post(
        "/episodes/{episode_id}/finish", response_model=Finished, responses=_errors(404), tags=["episodes"]
    )
    async def finish(episode_id: str) -> JSONResponse:
        return JSONResponse(await _heavy(store.finish, episode_id))

    @app.delete("/episodes/{episode_id}", status_code=204, responses=_errors(404), tags=["episodes"])
    async def delete(episode_id: str) -> Response:
        store.delete(episode_id)
        return Response(status_code=204)

    @app.get("/interface", response_model=InterfaceOut, tags=["interface"])
    async def interface() -> JSONResponse:
        return JSONResponse(store.interface_json())

    @app.put(
        "/interface/profile",
        response_model=InterfaceOut,
        responses=_errors(413, 422),
        openapi_extra=request_body(ProfileUpdate),
        tags=["interface"],
    )
    async def put_profile(request: Request) -> JSONResponse:
        body = parse_body(ProfileUpdate, await request.body())
        return JSONResponse(store.update_profile(body.profile.model_dump()))

    @app.get(
        "/metrics",
        response_class=Response,
        tags=["service"],
        responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    )
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(AccessMiddleware, observe=metrics.observe, router=app.router)
    return app


async def _reap_forever(store: EpisodeStore, interval: float) -> None:
    """Reaps idle episodes even when no request arrives (requests also reap on access)."""
    while True:
        await asyncio.sleep(interval)
        reaped = store.reap()
        if reaped:
            LOG.info("reaped %d idle episode(s)", reaped)


def configure_logging(level: str = "info") -> None:
    """Plain message lines on stderr: the access log's messages are already JSON."""
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r} (expected {', '.join(LOG_LEVELS)})")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("env_service")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def serve(host: str = "127.0.0.1", port: int = 8082, log_level: str = "info", **settings: Any) -> None:
    """Run the service with uvicorn until interrupted; `settings` are `ServiceSettings.from_options` keys."""
    configure_logging(log_level)
    app = create_app(ServiceSettings.from_options(**settings))
    LOG.info("serving %d tasks on http://%s:%d", app.state.store.task_count, host, port)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, lifespan="on")
