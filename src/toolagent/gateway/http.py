"""The gateway over streamable HTTP at `/mcp`, mounted in the API's FastAPI app.

Every request passes, in order:

1. the origin check: a browser's `Origin` must be on the allowlist
   (`TOOLAGENT_GATEWAY_ALLOWED_ORIGINS`; default the loopback origins), else 403 — a page on
   another site cannot drive a local gateway (DNS rebinding);
2. the SDK's bearer authentication with `KeyVerifier`: the API's keys are the bearer tokens,
   verified on every request (a revoked key's open session is refused at its next request), a
   missing, unknown or revoked key answered 401 with `WWW-Authenticate: Bearer`;
3. the SDK's streamable HTTP session manager, whose sessions are bound to the key that opened them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ToolAgentError, Unauthenticated
from ..runtime import Runtime
from .server import Caller, Gateway

#: The path the gateway is served at.
MCP_PATH = "/mcp"
#: Origins allowed when none are configured: pages served from this machine.
DEFAULT_ALLOWED_ORIGINS = ("http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*")


class KeyToken(AccessToken):
    """An access token that is one of the API's keys, with the user and key it resolved to."""

    principal: Any = None
    """The key's user (`engine.principals.Principal`)."""
    api_key: Any = None
    """The key's record (`engine.principals.ApiKey`)."""


class KeyVerifier:
    """The SDK's token verifier over the runtime's API keys (`Principals.authenticate_key`)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def verify_token(self, token: str) -> AccessToken | None:
        """The key's token, or None for a malformed, unknown or revoked key (then 401)."""
        try:
            principal, key = await self.runtime.principals.authenticate_key(token)
        except Unauthenticated:
            return None
        except ToolAgentError as exc:
            if getattr(exc, "code", "") in ("UNAUTHORIZED", "FORBIDDEN", "NOT_FOUND"):
                return None
            raise
        return KeyToken(
            token=token,
            client_id=key.id,
            subject=principal.name,
            scopes=list(key.scopes or ()),
            principal=principal,
            api_key=key,
        )


async def http_caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    """The caller of an HTTP request: the key its bearer token was verified as."""
    request = ctx.request
    user = request.scope.get("user") if request is not None else None
    token = user.access_token if isinstance(user, AuthenticatedUser) else None
    if not isinstance(token, KeyToken):  # the auth middleware lets nothing else through
        raise Unauthenticated()
    return Caller(token.principal, token.api_key)


def origin_allowed(origin: str, allowed: Sequence[str]) -> bool:
    """`origin` is on the allowlist (an entry ending in `:*` allows any port)."""
    for entry in allowed:
        if entry == "*" or origin == entry:
            return True
        if entry.endswith(":*") and origin.startswith(entry[:-1]) and origin[len(entry) - 1 :].isdigit():
            return True
    return False


class OriginCheck:
    """ASGI middleware answering 403 to a request whose `Origin` is not allowed (none: allowed)."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = tuple(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a foreign origin, else pass the request on."""
        origin = next((v.decode("latin-1") for k, v in scope.get("headers") or () if k == b"origin"), None)
        if scope["type"] == "http" and origin is not None and not origin_allowed(origin, self.allowed):
            body = json.dumps(
                {
                    "error": "forbidden_origin",
                    "error_description": f"origin {origin} is not allowed: add it to TOOLAGENT_GATEWAY_ALLOWED_ORIGINS",
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


class HttpGateway:
    """The `/mcp` endpoint: an ASGI app made before the runtime exists, serving once `serving` runs."""

    def __init__(self, allowed_origins: Sequence[str] | None = None) -> None:
        """Args:
        allowed_origins: Browser origins allowed (default `DEFAULT_ALLOWED_ORIGINS`).
        """
        self.allowed_origins = tuple(allowed_origins) if allowed_origins else DEFAULT_ALLOWED_ORIGINS
        self.gateway: Gateway | None = None
        self._manager: StreamableHTTPSessionManager | None = None
        self._verifier: KeyVerifier | None = None
        self.app: ASGIApp = OriginCheck(
            AuthenticationMiddleware(
                AuthContextMiddleware(RequireAuthMiddleware(self._sessions, [])),
                backend=BearerAuthBackend(self),
            ),
            self.allowed_origins,
        )

    async def verify_token(self, token: str) -> AccessToken | None:
        """Verify with the runtime's keys (none before `serving`: nothing is accepted)."""
        return await self._verifier.verify_token(token) if self._verifier is not None else None

    async def _sessions(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._manager is None:
            raise RuntimeError("the MCP gateway is not serving: enter HttpGateway.serving() first")
        await StreamableHTTPASGIApp(self._manager)(scope, receive, send)

    @contextlib.asynccontextmanager
    async def serving(self, runtime: Runtime) -> AsyncIterator[Gateway]:
        """Serve over `runtime` until the block ends (the app's lifespan); sessions end with it."""
        gateway = Gateway(runtime, http_caller)
        manager = StreamableHTTPSessionManager(app=gateway.server)
        async with manager.run():
            self.gateway, self._manager, self._verifier = gateway, manager, KeyVerifier(runtime)
            try:
                yield gateway
            finally:
                self.gateway = self._manager = self._verifier = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry point."""
        await self.app(scope, receive, send)


def allowed_origins(setting: str | None) -> tuple[str, ...]:
    """The origins of `TOOLAGENT_GATEWAY_ALLOWED_ORIGINS` (comma-separated), default the loopback ones."""
    found = tuple(o.strip().rstrip("/") for o in (setting or "").split(",") if o.strip())
    return found or DEFAULT_ALLOWED_ORIGINS


__all__ = [
    "DEFAULT_ALLOWED_ORIGINS",
    "MCP_PATH",
    "HttpGateway",
    "KeyToken",
    "KeyVerifier",
    "OriginCheck",
    "allowed_origins",
    "http_caller",
    "origin_allowed",
]
