"""Authentication: `Authorization: Bearer <api key>` or `X-API-Key`, resolved by the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request

from ..errors import ToolAgentError
from ..runs import BuildRunner
from ..runs.executor import engine_executor
from .services import Services


class Unauthorized(ToolAgentError):
    """A valid API key is required: send `Authorization: Bearer <key>` or `X-API-Key: <key>`."""

    code = "UNAUTHORIZED"


@dataclass(frozen=True)
class Caller:
    """The authenticated principal of a request."""

    principal: Any
    api_key: Any

    @property
    def user_id(self) -> str:
        """Stable id recorded on runs and executions."""
        return str(self.principal.name)

    @property
    def name(self) -> str:
        """User name."""
        return str(self.principal.name)

    @property
    def level(self) -> str:
        """Permission level."""
        return str(self.principal.level)

    @property
    def is_admin(self) -> bool:
        """Admins see and cancel everything."""
        return self.level == "admin"

    def runner(self, svc: Services) -> BuildRunner:
        """A runner whose steps pass the engine's gate as this caller."""
        if svc.engine is None:
            return svc.runner
        executor = engine_executor(svc.engine, svc.pool, self.principal, api_key=self.api_key)
        return BuildRunner(svc.pool, svc.store, executor=executor, flow_cap=svc.runner.flow_cap)

    async def cancel_run(self, svc: Services, run_id: str) -> bool:
        """Cancel a run's executions wherever they run (another process included)."""
        if svc.engine is None:
            return False
        return bool(await svc.engine.cancel_run(run_id, self.principal))


def _raw_key(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    key = request.headers.get("x-api-key")
    return key.strip() if key else None


async def current_caller(request: Request) -> Caller:
    """The request's caller; 401 for a missing, unknown or revoked key."""
    svc: Services = request.app.state.services
    raw = _raw_key(request)
    if raw is None:
        raise Unauthorized()
    try:
        principal, api_key = await svc.engine.principals.authenticate_key(raw)
    except ToolAgentError as exc:
        if getattr(exc, "code", "") in ("UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND"):
            raise Unauthorized(f"invalid API key: {exc.message}") from exc
        raise
    request.state.caller = Caller(principal, api_key)
    return request.state.caller  # type: ignore[no-any-return]


CallerDep = Annotated[Caller, Depends(current_caller)]
