"""Authentication: `Authorization: Bearer <api key>` or `X-API-Key`, resolved by the engine."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.types import Scope

from ..errors import ToolAgentError, Unauthenticated
from ..runs import BuildRunner
from ..tools.base import CallContext
from .services import Services


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

    @property
    def context(self) -> CallContext:
        """The call context of this caller's tool calls (principal and API key)."""
        return CallContext(self.principal, api_key=self.api_key)

    def runner(self, svc: Services) -> BuildRunner:
        """A runner whose every step goes through the runtime's tool stack as this caller: the level
        x risk gate, the agent's tool list, this API key's scope and revocation, rate limit and
        budget, history, audit, timeout and cancellation by id."""
        return svc.runtime.runner(self.context)

    async def cancel_run(self, svc: Services, run_id: str) -> list[str]:
        """Cancel a run's running executions wherever they run (another process included) and flag the
        run so its later steps end cancelled; returns the ids of the executions asked to stop (at
        once: the caller waits for the run itself)."""
        return list(await svc.runtime.cancel_run(run_id, self.principal, wait_s=0))


def raw_key(scope: Scope) -> str | None:
    """The API key a request carries: `Authorization: Bearer <key>`, else `X-API-Key` (the first of each header)."""
    bearer: str | None = None
    api_key: str | None = None
    for name, value in scope.get("headers") or ():
        if name == b"authorization" and bearer is None:
            bearer = value.decode("latin-1")
        elif name == b"x-api-key" and api_key is None:
            api_key = value.decode("latin-1")
    if bearer:
        scheme, _, value = bearer.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    return api_key.strip() if api_key else None


async def authenticate(svc: Services, raw: str | None) -> Caller:
    """The caller a raw key belongs to.

    Raises:
        Unauthenticated: no key, or an unknown or revoked one (401).
    """
    if raw is None:
        raise Unauthenticated()
    try:
        principal, api_key = await svc.runtime.principals.authenticate_key(raw)
    except ToolAgentError as exc:
        if getattr(exc, "code", "") in ("UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND"):
            raise Unauthenticated(f"invalid API key: {exc.message}") from exc
        raise
    return Caller(principal, api_key)


async def current_caller(request: Request) -> Caller:
    """The request's caller; 401 for a missing, unknown or revoked key."""
    return await authenticate(request.app.state.services, raw_key(request.scope))


CallerDep = Annotated[Caller, Depends(current_caller)]
