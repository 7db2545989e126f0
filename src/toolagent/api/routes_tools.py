"""The tools router as REST routes under `/api/tools` (the procedures live in `procedures.py`).

| route                                    | procedure           |
| ---                                      | ---                 |
| `GET  /api/tools`                        | listTools           |
| `POST /api/tools/execute`                | executeTool         |
| `GET  /api/tools/executions/active`      | getActiveExecutions |
| `GET  /api/tools/executions/{id}`        | getToolStatus       |
| `POST /api/tools/executions/{id}/cancel` | cancelToolExecution |
| `GET  /api/tools/history`                | getToolHistory      |
| `GET  /api/tools/metrics`                | getToolMetrics      |
| `GET  /api/tools/{server}/{tool}`        | getToolDetails      |

`POST /api/tools/execute` is answered by `direct.py` ahead of FastAPI when the request is a plain
one (a JSON body, a valid key and input); this route answers the rest and documents it.

The fixed routes are declared before the tool-name route, so a server named `executions`,
`history` or `metrics` would be shadowed: name servers otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from fastapi.types import DecoratedCallable

from ..errors import NotFound, ToolAgentError
from . import procedures as p
from .auth import Caller, CallerDep
from .errors import STATUS_BY_CODE, error_body, error_code
from .route_helpers import AUTH_RESPONSES, Responses, error_response, services
from .services import Services

router = APIRouter(prefix="/api/tools", tags=["tools"])

_INPUT: Responses = {400: error_response("Invalid input: the message names each invalid field")}
_FOUND: Responses = {404: error_response("No such tool or execution (other users' executions are never visible)")}
_EXEC: Responses = {
    403: error_response("Permission denied: the message names the user, level, tool and risk"),
    429: error_response("Rate limit or monthly budget exceeded (`Retry-After` and X-RateLimit headers)"),
    500: error_response("The tool failed, timed out or was cancelled; the message is the tool's"),
}
_RATE_HEADERS = {
    "X-RateLimit-Limit": {"description": "Calls allowed in the current window", "schema": {"type": "string"}},
    "X-RateLimit-Remaining": {"description": "Calls left in the current window", "schema": {"type": "string"}},
    "X-RateLimit-Reset": {"description": "Seconds until the window resets", "schema": {"type": "string"}},
}


async def _respond(name: str, request: Request, caller: Caller, inp: Any) -> JSONResponse:
    return await respond(name, services(request), caller, inp)


async def respond(name: str, svc: Services, caller: Caller, inp: Any) -> JSONResponse:
    """Run a procedure and answer with its body, status and headers, or its error."""
    reply = p.Reply()
    try:
        data = await p.PROCEDURES[name].run(svc, caller, inp, reply)
    except ToolAgentError as exc:
        code = error_code(exc)
        return JSONResponse(
            error_body(code, exc.message, reply.details),
            status_code=STATUS_BY_CODE.get(code, 500),
            headers={**reply.headers, **p.refusal_headers(exc)},
        )
    return JSONResponse(data, status_code=reply.status, headers=reply.headers)


def _route(
    method: str, path: str, name: str, summary: str, responses: Responses
) -> Callable[[DecoratedCallable], DecoratedCallable]:
    """Declare a procedure's route: operation id = procedure name, response model = its output."""
    return router.api_route(
        path,
        methods=[method],
        summary=f"{summary} ({name})",
        operation_id=name,
        response_model=p.PROCEDURES[name].output,
        responses=responses,
    )


@_route("GET", "", "listTools", "List tools", {**_INPUT, **AUTH_RESPONSES})
async def list_tools(request: Request, caller: CallerDep, inp: Annotated[p.ListToolsInput, Query()]) -> Any:
    """The registered tools, filtered by category, tags and search, grouped by category, each marked
    `runnable` as a call by this caller would be decided (level against risk, the key's scopes, the
    operator's switch). A scoped key lists only the tools of its categories. Deprecated tools are
    left out unless asked for."""
    return await _respond("listTools", request, caller, inp)


@_route(
    "POST",
    "/execute",
    "executeTool",
    "Execute a tool",
    {
        200: {"description": "The tool succeeded", "headers": _RATE_HEADERS},
        202: {
            "model": p.ExecuteAcceptedOutput,
            "description": "`async: true`: started; poll its status",
            "headers": _RATE_HEADERS,
        },
        **_INPUT,
        **AUTH_RESPONSES,
        **_FOUND,
        **_EXEC,
    },
)
async def execute_tool(request: Request, caller: CallerDep, inp: p.ExecuteToolInput) -> Any:
    """Run one tool as the caller: permission gate (level against risk, API key scope), rate limit
    and budget, then the call bounded by `timeout` (1000..300000 ms). Waits for the result, or with
    `"async": true` answers 202 with the execution id at once. Every answer past input validation
    carries the caller's X-RateLimit headers; a 429 also `Retry-After`."""
    return await _respond("executeTool", request, caller, inp)


@_route("GET", "/executions/active", "getActiveExecutions", "Running executions", AUTH_RESPONSES)
async def active_executions(request: Request, caller: CallerDep) -> Any:
    """The caller's running executions with their running time (everyone's, for an admin)."""
    return await _respond("getActiveExecutions", request, caller, p.NoInput())


_ExecutionId = Annotated[str, Path(min_length=1, max_length=100, description="`exec_...` id from executeTool.")]


@_route("GET", "/executions/{executionId}", "getToolStatus", "Execution status", {**_INPUT, **AUTH_RESPONSES, **_FOUND})
async def tool_status(request: Request, executionId: _ExecutionId, caller: CallerDep) -> Any:  # noqa: N803 - the API's name
    """One execution of the caller (anyone's, for an admin): status, times, result or error."""
    return await _respond("getToolStatus", request, caller, p.ExecutionIdInput(executionId=executionId))


@_route(
    "POST",
    "/executions/{executionId}/cancel",
    "cancelToolExecution",
    "Cancel an execution",
    {**_INPUT, **AUTH_RESPONSES, **_FOUND},
)
async def cancel_execution(request: Request, executionId: _ExecutionId, caller: CallerDep) -> Any:  # noqa: N803
    """Cancel a running execution of the caller (anyone's, for an admin); 400 when it is not running."""
    return await _respond("cancelToolExecution", request, caller, p.ExecutionIdInput(executionId=executionId))


@_route(
    "GET",
    "/history",
    "getToolHistory",
    "Execution history",
    {**_INPUT, **AUTH_RESPONSES, 403: error_response("allUsers/userId asked for by a non-admin")},
)
async def history(request: Request, caller: CallerDep, inp: Annotated[p.HistoryInput, Query()]) -> Any:
    """A page (limit 1..100, default 50) of the caller's executions, newest first, with statistics
    over everything the filters match."""
    return await _respond("getToolHistory", request, caller, inp)


@_route("GET", "/metrics", "getToolMetrics", "Usage metrics", {**_INPUT, **AUTH_RESPONSES})
async def metrics(request: Request, caller: CallerDep, inp: Annotated[p.MetricsInput, Query()]) -> Any:
    """Registry and usage figures: the caller's own stats, per category, per tool, the most used."""
    return await _respond("getToolMetrics", request, caller, inp)


@_route("GET", "/{name:path}", "getToolDetails", "Tool details", {**_INPUT, **AUTH_RESPONSES, **_FOUND})
async def tool_details(
    request: Request,
    name: Annotated[str, Path(max_length=300, description="`server/tool`.")],
    caller: CallerDep,
) -> Any:
    """One tool: description, input schema, category, risk, its metrics and the caller's own figures."""
    if not name.strip():
        # Starlette's path pattern lets `/api/tools/%0A` through with an empty name.
        raise NotFound("tool '' not found: list the tools with GET /api/tools")
    return await _respond("getToolDetails", request, caller, p.ToolNameInput(name=name))
