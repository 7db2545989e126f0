"""The FastAPI application: same store, server config and engine as the CLI.

`GET /metrics` serves the Prometheus text exposition: the engine's figures (read from the store,
so every process reports the same) plus this process's HTTP request counts and latencies. It
needs no API key by default, as Prometheus scrapers send none; `TOOLAGENT_METRICS_AUTH=key`
(any valid API key) or `=admin` (an admin's key) protects it, e.g. when the API is reachable
from outside the monitoring network: the figures name tools and users.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any, Literal, cast, get_args

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from .._heap import tune_collector
from ..engine.prometheus import CONTENT_TYPE, HttpMetrics, render
from ..errors import ConfigError, PermissionDenied
from ..gateway.http import MCP_PATH, HttpGateway, allowed_origins
from ..mcp.config import ServersConfig
from ..settings import Settings
from . import errors
from .auth import current_caller
from .body_limit import BodyLimit, max_body_bytes_of
from .direct import EXECUTE_PATH, TRPC_EXECUTE_PATH, DirectExecute
from .docs import install_docs
from .edge import EdgeCheck
from .services import Services, open_services
from .yaml_body import YamlAgentBody

#: What the API says about itself in /openapi.json.
DESCRIPTION = (
    "Run tool agents over HTTP: agents admin and BUILD runs under /api/agents, /api/runs and "
    "/api/deliverables, and the tools router (list, execute, status, cancel, history, metrics) as REST "
    "routes under /api/tools and as tRPC procedures under /trpc. Every route but /health, /ready and "
    "/metrics needs `Authorization: Bearer <api key>` or `X-API-Key: <api key>` (create one with "
    "`toolagent keys create --user NAME`); /metrics needs one only when `TOOLAGENT_METRICS_AUTH` is "
    "`key` or `admin`."
)

MetricsAuth = Literal["none", "key", "admin"]
#: Who may read /metrics unless `create_app(metrics_auth=...)` or `TOOLAGENT_METRICS_AUTH` says otherwise.
DEFAULT_METRICS_AUTH: MetricsAuth = "none"
METRICS_AUTH_ENV = "TOOLAGENT_METRICS_AUTH"


def metrics_auth_of(settings: Settings) -> MetricsAuth:
    """`TOOLAGENT_METRICS_AUTH` (`none`, `key` or `admin`), default `none`.

    Raises:
        ConfigError: any other value.
    """
    value = (settings.metrics_auth or DEFAULT_METRICS_AUTH).strip().lower()
    if value not in get_args(MetricsAuth):
        raise ConfigError(f"{METRICS_AUTH_ENV}={value!r}: expected one of {', '.join(get_args(MetricsAuth))}")
    return cast(MetricsAuth, value)  # one of its values, checked above


def create_app(
    *,
    db: str | None = None,
    servers: ServersConfig | None = None,
    metrics_auth: MetricsAuth | None = None,
    max_body_bytes: int | None = None,
    settings: Settings | None = None,
    submit: bool = False,
) -> FastAPI:
    """Build the app; the store and MCP servers open when it starts, and where BUILD runs and async
    calls go is decided then, once (`Services.dispatch`, see `toolagent.workers.dispatch`).

    Args:
        db: store URL (default: `settings.database_url` or the embedded SQLite file).
        servers: MCP server config (default: the usual lookup of `mcp.json`).
        metrics_auth: who may read /metrics: `none` (anyone), `key` (any valid API key), `admin`
            (an admin's key); default `TOOLAGENT_METRICS_AUTH`, else `none`.
        max_body_bytes: largest request body accepted (413 above it); default
            `TOOLAGENT_MAX_BODY_BYTES`, else 1 MiB.
        settings: the settings this app runs with (default: read from the environment, once, here).
        submit: `serve --submit`: BUILD runs and async calls go to the workers (PostgreSQL), as
            with `TOOLAGENT_EXECUTION=queue`.

    Raises:
        ConfigError: an unknown `metrics_auth` (or `TOOLAGENT_METRICS_AUTH`), a bad
            `TOOLAGENT_MAX_BODY_BYTES`.
        UsageError: (when the app starts) `submit` on a SQLite store.
    """
    if settings is None:
        settings = Settings.from_env()
    config = servers if servers is not None else ServersConfig.load()
    if metrics_auth is None:
        metrics_auth = metrics_auth_of(settings)
    elif metrics_auth not in get_args(MetricsAuth):
        raise ConfigError(f"metrics_auth={metrics_auth!r}: expected one of {', '.join(get_args(MetricsAuth))}")

    gateway = HttpGateway(allowed_origins(settings.gateway_allowed_origins))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_services(db, config, settings=settings, submit=submit) as svc, gateway.serving(svc.runtime):
            app.state.services = svc
            if getattr(app.state, "freeze_heap", False):  # set by `serve`, which owns its process
                tune_collector(settings.gc_threshold)
            yield

    app = FastAPI(
        title="toolagent",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_docs(app)
    app.router.routes.append(Route(MCP_PATH, gateway, include_in_schema=False))  # the MCP gateway (`toolagent.gateway`)
    routes: list[BaseRoute] = []
    direct_routes: dict[str, BaseRoute] = {}
    errors.install(app)
    # Outermost last: the size cap applies before the edge checks read the body, and both before
    # the tool call's direct answer.
    app.add_middleware(DirectExecute, routes=direct_routes)
    app.add_middleware(EdgeCheck)
    app.add_middleware(YamlAgentBody)  # a YAML agent PUT becomes JSON before the edge checks see it
    app.add_middleware(
        BodyLimit, max_bytes=max_body_bytes if max_body_bytes is not None else max_body_bytes_of(settings)
    )
    app.state.http_metrics = HttpMetrics()
    app.add_middleware(RequestMetrics, metrics=app.state.http_metrics, routes=routes)

    @app.get("/health", tags=["system"], summary="Liveness")
    async def health() -> dict[str, Any]:
        """Always 200 while the process serves requests."""
        return {"status": "ok", "version": __version__}

    @app.get("/ready", tags=["system"], summary="Readiness", responses={503: {"description": "Not ready"}})
    async def ready(request: Request) -> Response:
        """200 when the store answers and servers are configured, else 503 with the reason."""
        svc: Services = request.app.state.services
        checks: dict[str, Any] = {"servers": list(svc.runtime.catalogue.server_names)}
        try:
            checks["schemaVersion"] = await svc.store.db.schema_version()
            ok = bool(svc.runtime.catalogue.server_names)
            if not ok:
                checks["reason"] = "no MCP servers configured"
        except Exception as exc:  # noqa: BLE001 - readiness reports any failure as not ready
            ok, checks["reason"] = False, f"store unreachable: {exc}"
        return JSONResponse({"status": "ready" if ok else "not ready", **checks}, status_code=200 if ok else 503)

    @app.get(
        "/metrics",
        tags=["system"],
        summary="Prometheus metrics",
        response_class=Response,
        responses={
            200: {
                "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}},
                "description": "Prometheus text exposition format 0.0.4",
            },
            401: {"description": "TOOLAGENT_METRICS_AUTH is `key` or `admin` and no valid API key was sent"},
            403: {"description": "TOOLAGENT_METRICS_AUTH is `admin` and the key is not an admin's"},
        },
    )
    async def metrics(request: Request) -> Response:
        """The engine's figures — `tool_execution_total`, `tool_execution_duration_seconds`,
        `tool_permission_denied_total`, `tool_rate_limited_total`, `tool_executions_active`,
        `tool_user_executions_total`, `tool_discovery_count` (registered tools per stored agent) —
        and this process's `http_requests_total` and `http_request_duration_seconds`. No API key
        is needed unless the server runs with `TOOLAGENT_METRICS_AUTH=key` or `=admin`."""
        svc: Services = request.app.state.services
        categories = None
        if metrics_auth != "none":
            caller = await current_caller(request)
            if metrics_auth == "admin" and not caller.is_admin:
                raise PermissionDenied(f"user '{caller.name}' ({caller.level}) may not read /metrics: requires admin")
            categories = caller.principal.categories  # a scoped key sees its categories' tools only
        snapshot = (await svc.runtime.metrics(categories=categories)).to_prometheus(await _discovery(svc))
        if not svc.store.db.is_sqlite:  # the workers' queue (see `toolagent.workers`)
            from dataclasses import replace as _replace

            from ..workers.app import stalled_after_s

            counts = {(c.queue, c.status): c.count for c in await svc.store.queue.counts()}
            workers = await svc.store.queue.worker_count(stalled_after_s(svc.settings))
            snapshot = _replace(snapshot, queue=counts, workers=workers)
        return Response(render(snapshot, http=request.app.state.http_metrics), media_type=CONTENT_TYPE)

    from .routes_agents import router as agents_router
    from .routes_orgs import router as orgs_router
    from .routes_runs import router as runs_router

    # The tool routes first: Starlette tries routes in order, and a tool call is the request that
    # comes most often (each router passed over costs a match attempt).
    routers = [*_include_optional_routers(app), agents_router, runs_router, orgs_router]
    app.include_router(agents_router)
    app.include_router(runs_router)
    app.include_router(orgs_router)
    # Every route with its methods (a router's own list: its routes carry their full paths), for 405s.
    routes.extend(r for r in app.router.routes if getattr(r, "methods", None))
    routes.extend(r for router in routers for r in router.routes)
    direct_routes.update(
        {
            EXECUTE_PATH: _route_at(routes, EXECUTE_PATH, "POST"),
            TRPC_EXECUTE_PATH: _route_at(routes, "/trpc/{path:path}", "POST"),
        }
    )
    return app


def _route_at(routes: list[BaseRoute], path: str, method: str) -> BaseRoute:
    return next(r for r in routes if getattr(r, "path", None) == path and method in getattr(r, "methods", ()))


class RequestMetrics:
    """ASGI middleware counting every HTTP request in `HttpMetrics` by route template
    (`/api/runs/{run_id}`, never the raw path, to bound the series) and status, timed to the start
    of the response (a streamed response counts the time to its first byte); it also completes the
    `Allow` header of 405 answers (see `_allow_methods`).

    A plain ASGI callable rather than `@app.middleware("http")`: that one runs each request in a
    task group of its own with memory streams between it and the app, a cost paid on every call.
    """

    def __init__(self, app: ASGIApp, metrics: HttpMetrics, routes: list[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, observing its status when the response starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        observed = False

        def observe(status: int) -> None:
            nonlocal observed
            observed = True
            path = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe(scope["method"], path, status, time.perf_counter() - t0)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and not observed:
                status = int(message["status"])
                if status == 405:
                    message = {**message, "headers": _allow_methods(self.routes, scope, message.get("headers") or [])}
                observe(status)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if not observed:
                observe(500)


def _allow_methods(routes: list[BaseRoute], scope: Scope, headers: Any) -> list[tuple[bytes, bytes]]:
    """Starlette's 405 lists the methods of the first route matching the path only; list those of
    every route with the same path template (GET, PUT and DELETE /api/agents/{org}/{slug} are three
    routes). Routes of other templates that happen to match too (`/api/tools/{name:path}` for
    `/api/tools/execute`) are another resource and stay out."""
    kept = [(k, v) for k, v in headers if k.lower() != b"allow"]
    matching = [r for r in routes if r.matches(scope)[0] is not Match.NONE]
    if not matching:
        return list(headers)
    template = getattr(matching[0], "path", None)
    methods = {m for r in matching if getattr(r, "path", None) == template for m in getattr(r, "methods", ())}
    return [*kept, (b"allow", ", ".join(sorted(methods)).encode("latin-1"))]


def _include_optional_routers(app: FastAPI) -> list[APIRouter]:
    from .routes_tools import router as tools_router
    from .trpc import router as trpc_router

    app.include_router(tools_router)
    app.include_router(trpc_router)
    return [tools_router, trpc_router]


async def _discovery(svc: Services) -> dict[str, int]:
    """Per stored agent (`org/slug`), how many of its tools the engine has registered and enabled."""
    from ..agents import load_record

    counts: dict[str, int] = {}
    for record in await svc.store.agents.list_agents():
        try:
            tools = load_record(record).definition.configuration.tools
        except Exception:  # noqa: BLE001 - an invalid stored definition discovers nothing
            continue
        entries = (svc.runtime.catalogue.get(name) for name in tools)
        counts[record.ref] = sum(1 for entry in entries if entry is not None and entry.enabled)
    return counts
