"""The FastAPI application: same store, server config and engine as the CLI."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

from .. import __version__
from ..mcp.config import ServersConfig
from . import errors
from .services import Services, open_services

#: What the API says about itself in /openapi.json.
DESCRIPTION = (
    "Run tool agents over HTTP: BUILD runs of stored agents, and the tools router (list, execute, "
    "status, cancel, history, metrics) as REST routes under /api/tools and as tRPC procedures under "
    "/trpc. Every route but /health and /ready needs `Authorization: Bearer <api key>` "
    "(create one with `toolagent keys create --user NAME`)."
)


def create_app(*, db: str | None = None, servers: ServersConfig | None = None, engine_factory: Any = None) -> FastAPI:
    """Build the app; the store and MCP servers open when it starts.

    Args:
        db: store URL (default: `TOOLAGENT_DATABASE_URL` or the embedded SQLite file).
        servers: MCP server config (default: the usual lookup of `mcp.json`).
        engine_factory: `callable(store) -> engine`; default: the execution engine with its config.
    """
    config = servers if servers is not None else ServersConfig.load()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_services(db, config) as svc:
            factory = engine_factory or _default_engine
            async with factory(svc) as engine:
                svc.engine = engine
                app.state.services = svc
                yield

    app = FastAPI(title="toolagent", version=__version__, description=DESCRIPTION, lifespan=lifespan)
    errors.install(app)
    app.state.http_metrics = HttpMetrics()

    @app.middleware("http")
    async def _count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        app.state.http_metrics.observe(request.method, path, response.status_code, time.perf_counter() - t0)
        return response

    @app.get("/health", tags=["system"], summary="Liveness")
    async def health() -> dict[str, Any]:
        """Always 200 while the process serves requests."""
        return {"status": "ok", "version": __version__}

    @app.get("/ready", tags=["system"], summary="Readiness", responses={503: {"description": "Not ready"}})
    async def ready(request: Request) -> Response:
        """200 when the store answers and servers are configured, else 503 with the reason."""
        svc: Services = request.app.state.services
        checks: dict[str, Any] = {"servers": list(svc.pool.server_names)}
        try:
            checks["schemaVersion"] = await svc.store.db.schema_version()
            ok = bool(svc.pool.server_names)
            if not ok:
                checks["reason"] = "no MCP servers configured"
        except Exception as exc:  # noqa: BLE001 - readiness reports any failure as not ready
            ok, checks["reason"] = False, f"store unreachable: {exc}"
        return JSONResponse({"status": "ready" if ok else "not ready", **checks}, status_code=200 if ok else 503)

    from .routes_agents import router as agents_router

    app.include_router(agents_router)
    _include_optional_routers(app)
    return app


def _include_optional_routers(app: FastAPI) -> None:
    from .routes_tools import router as tools_router
    from .trpc import router as trpc_router

    app.include_router(tools_router)
    app.include_router(trpc_router)


@contextlib.asynccontextmanager
async def _default_engine(svc: Services) -> AsyncIterator[Any]:
    from ..engine import Engine, EngineConfig

    engine = Engine(svc.store, config=EngineConfig.load())
    async with engine:
        specs, _ = await svc.pool.all_tools()
        engine.registry.update(specs)
        yield engine


class HttpMetrics:
    """Request counts and latencies per method, route and status, for /metrics."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, int], int] = {}
        self.seconds: dict[tuple[str, str], list[float]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request."""
        self.counts[(method, route, status)] = self.counts.get((method, route, status), 0) + 1
        samples = self.seconds.setdefault((method, route), [])
        if len(samples) < 10_000:
            samples.append(seconds)
