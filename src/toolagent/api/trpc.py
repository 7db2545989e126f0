"""The tools router in tRPC's HTTP wire format (v11, no transformer), at `/trpc/tools.<procedure>`.

- queries: `GET /trpc/tools.listTools?input=<url-encoded JSON>` (no `input`: no input);
- mutations: `POST /trpc/tools.executeTool` with the JSON input as the body;
- batches (httpBatchLink): `?batch=1`, procedures joined by commas, inputs as `{"0": ..., "1": ...}`,
  answered with an array (HTTP 207 when the calls' statuses differ);
- success: `{"result": {"data": ...}}`; error: `{"error": {"message", "code": <JSON-RPC number>,
  "data": {"code", "httpStatus", "path"}}}`, as `@trpc/server`'s default error shape.

The procedures are those of the REST routes (`procedures.py`); authentication is the same
`Authorization: Bearer` / `X-API-Key`, answered in tRPC's shape when it fails.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from starlette.types import Scope

from ..errors import ToolAgentError
from ..inputs import InputProblem, parse_json
from . import procedures as p
from .auth import Caller, authenticate, raw_key
from .edge import JSON_SCOPE_KEY
from .errors import error_code
from .services import Services
from .trpc_errors import HTTP_STATUS, error_shape

log = logging.getLogger(__name__)

router = APIRouter(prefix="/trpc", include_in_schema=False)

#: The router's namespace: `tools.listTools`.
NAMESPACE = "tools"

_METHOD = {"query": "GET", "mutation": "POST"}
#: No body parsed by the edge checks (`None` is a parsed JSON `null`).
_UNCHECKED: Any = object()


class TrpcError(Exception):
    """A failure before a procedure ran (parse, routing, method, input), in tRPC's terms."""

    def __init__(self, code: str, message: str, **data: Any) -> None:
        self.code = code
        self.message = message
        self.data = data
        super().__init__(message)


@dataclass
class _Outcome:
    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def _failure(
    code: str, message: str, path: str | None, headers: dict[str, str] | None = None, **extra: Any
) -> _Outcome:
    return _Outcome(error_shape(code, message, path, **extra), HTTP_STATUS.get(code, 500), dict(headers or {}))


def _inputs(raw: str | bytes | None, batch: bool, count: int, checked: Any = _UNCHECKED) -> list[Any]:
    """The input of each call (None where absent); `checked` is the body the edge checks parsed already."""
    if checked is not _UNCHECKED:
        parsed = checked
    elif raw is None or raw in ("", b""):
        return [None] * count
    else:
        try:
            parsed = parse_json(raw, "input")
        except InputProblem as exc:
            raise TrpcError("PARSE_ERROR" if exc.unparsable else "BAD_REQUEST", str(exc)) from exc
    if not batch:
        return [parsed]
    if not isinstance(parsed, dict):
        raise TrpcError("BAD_REQUEST", '"input" needs to be an object when doing a batch call')
    return [parsed.get(str(i)) for i in range(count)]


async def _call(path: str, method: str, raw: Any, caller: Caller | ToolAgentError, svc: Services) -> _Outcome:
    """One procedure call, answered in tRPC's shape whatever happens."""
    namespace, _, name = path.partition(".")
    proc = p.PROCEDURES.get(name) if namespace == NAMESPACE else None
    if proc is None:
        return _failure("NOT_FOUND", f'No procedure found on path "{path}"', path)
    if method != _METHOD[proc.kind]:
        return _failure(
            "METHOD_NOT_SUPPORTED",
            f'Unsupported {method}-request to {proc.kind} procedure at path "{path}"',
            path,
            {"Allow": _METHOD[proc.kind]},
        )
    if isinstance(caller, ToolAgentError):
        return _failure(error_code(caller), caller.message, path)
    try:
        inp = proc.parse(raw)
    except ValidationError as exc:
        fields = p.validation_fields(exc)
        return _failure("BAD_REQUEST", p.validation_message(fields), path, fields=fields)
    reply = p.Reply()
    try:
        data = await proc.run(svc, caller, inp, reply)
    except ToolAgentError as exc:
        return _failure(
            error_code(exc), exc.message, path, {**reply.headers, **p.refusal_headers(exc)}, details=reply.details
        )
    except Exception:  # noqa: BLE001 - never a stack trace in a response
        log.exception("tRPC procedure %s failed", path)
        return _failure("INTERNAL_SERVER_ERROR", "internal error; see the server log", path)
    return _Outcome({"result": {"data": data}}, 200, reply.headers)


async def _caller(svc: Services, scope: Scope) -> Caller | ToolAgentError:
    try:
        return await authenticate(svc, raw_key(scope))
    except ToolAgentError as exc:
        return exc


async def answer_one(svc: Services, scope: Scope, path: str, raw: Any) -> JSONResponse:
    """A single (unbatched) POST to procedure `path` with the parsed JSON body `raw`, answered."""
    outcome = await _call(path, "POST", raw, await _caller(svc, scope), svc)
    return JSONResponse(outcome.body, status_code=outcome.status, headers=outcome.headers)


@router.api_route("/{path:path}", methods=["GET", "POST"])
async def trpc(request: Request, path: str) -> Response:
    """Answer one tRPC request (single or batched)."""
    batch = request.query_params.get("batch") == "1"
    paths = path.split(",") if batch else [path]
    try:
        if request.method == "GET":
            inputs = _inputs(request.query_params.get("input"), batch, len(paths))
        else:
            inputs = _inputs(await request.body(), batch, len(paths), request.scope.get(JSON_SCOPE_KEY, _UNCHECKED))
    except TrpcError as exc:
        outcome = _failure(exc.code, exc.message, None if batch else path)
        return JSONResponse([outcome.body] * len(paths) if batch else outcome.body, status_code=outcome.status)
    svc: Services = request.app.state.services
    caller = await _caller(svc, request.scope)
    outcomes: list[_Outcome | None] = [None] * len(paths)

    async def one(i: int) -> None:
        outcomes[i] = await _call(paths[i], request.method, inputs[i], caller, svc)

    if len(paths) == 1:
        await one(0)
    else:
        async with anyio.create_task_group() as tg:
            for i in range(len(paths)):
                tg.start_soon(one, i)
    done = [o for o in outcomes if o is not None]
    headers: dict[str, str] = {}
    for o in done:
        headers.update(o.headers)
    if not batch:
        return JSONResponse(done[0].body, status_code=done[0].status, headers=headers)
    statuses = {o.status for o in done}
    return JSONResponse(
        [o.body for o in done], status_code=statuses.pop() if len(statuses) == 1 else 207, headers=headers
    )
