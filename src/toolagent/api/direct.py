"""The tool call, answered without FastAPI's per-request machinery.

`POST /api/tools/execute` and tRPC's `POST /trpc/tools.executeTool` are the requests a busy
server gets most. Through FastAPI each one passes an exception middleware, an exit-stack
middleware, the router's match, a `Request`, the dependency solver (for the caller) and a second
parse of the body the edge checks have parsed already: about a sixth of the server's CPU per
call. `DirectExecute` sits inside the size cap and the edge checks and answers these two
requests itself, with the same authentication, the same procedure and the same response bodies.

Whatever is off the common path goes on to FastAPI, which answers it as before: a REST call with
no key or a refused one, or input that fails validation (each answer is FastAPI's own: 401,
400 naming the fields); a body not sent as JSON; any query string (a tRPC batch). Nothing has been
run on the request's behalf by then, so it is answered exactly once. The FastAPI routes stay
declared, for those requests and for the OpenAPI document. An exception the procedure does not
turn into an answer reaches the app's error handler, as from a route.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ToolAgentError
from . import routes_tools, trpc
from .auth import authenticate, raw_key
from .edge import JSON_SCOPE_KEY
from .procedure_models import ExecuteToolInput
from .services import Services

#: The REST route and the tRPC procedure answered here.
EXECUTE_PATH = "/api/tools/execute"
TRPC_EXECUTE_PATH = "/trpc/tools.executeTool"


class DirectExecute:
    """ASGI middleware answering the tool call's two routes; see the module docstring.

    `routes` maps each path to the FastAPI route that declares it (filled in once the app's routes
    exist): a request answered here is labelled with it in the HTTP metrics, as one answered there.
    """

    def __init__(self, app: ASGIApp, routes: Mapping[str, BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a tool call, or pass the request on."""
        path: str = scope.get("path", "")  # a lifespan scope has none
        if (
            path not in self.routes
            or scope["type"] != "http"
            or scope["method"] != "POST"
            or scope.get("query_string")
            or JSON_SCOPE_KEY not in scope
        ):
            await self.app(scope, receive, send)
            return
        svc: Services = scope["app"].state.services
        body = scope[JSON_SCOPE_KEY]
        if path == TRPC_EXECUTE_PATH:
            scope["route"] = self.routes[path]
            response = await trpc.answer_one(svc, scope, "tools.executeTool", body)
            await response(scope, receive, send)
            return
        if not _json_typed(scope):
            await self.app(scope, receive, send)
            return
        try:
            caller = await authenticate(svc, raw_key(scope))
            inp = ExecuteToolInput.model_validate(body)
        except (ToolAgentError, ValidationError):
            await self.app(scope, receive, send)  # FastAPI's answer: the same checks, its 401 or 400
            return
        scope["route"] = self.routes[path]
        response = await routes_tools.respond("executeTool", svc, caller, inp)
        await response(scope, receive, send)


def _json_typed(scope: Scope) -> bool:
    """A JSON `Content-Type` (`application/json` or `application/...+json`, with parameters): the
    bodies FastAPI's routes parse as JSON. The edge checks parse a few more (no content type at
    all, for one); FastAPI answers those."""
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            media: bytes = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (media.startswith(b"application/") and media.endswith(b"+json"))
    return False


__all__ = ["EXECUTE_PATH", "TRPC_EXECUTE_PATH", "DirectExecute"]
