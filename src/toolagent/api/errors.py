"""toolagent's error tree -> HTTP answers, through `errors.ERROR_CODES`; never a stack trace in a response."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import ERROR_CODES, RateLimited, ToolAgentError

log = logging.getLogger(__name__)

#: tRPC error code -> HTTP status (read off the error table).
STATUS_BY_CODE: dict[str, int] = {code: answer.http_status for code, answer in ERROR_CODES.items()}


def error_code(exc: ToolAgentError) -> str:
    """The tRPC code of an error (its class attribute; unauthenticated errors declare UNAUTHORIZED)."""
    return getattr(exc, "code", "INTERNAL_SERVER_ERROR") or "INTERNAL_SERVER_ERROR"


def rate_headers(exc: ToolAgentError) -> dict[str, str]:
    """`Retry-After` and the X-RateLimit headers of a rate-limit refusal."""
    if not isinstance(exc, RateLimited):
        return {}
    return {
        "Retry-After": str(max(1, int(round(exc.retry_after_s)))),
        "X-RateLimit-Limit": str(exc.limit),
        "X-RateLimit-Remaining": str(exc.remaining),
        "X-RateLimit-Reset": str(max(0, int(round(exc.retry_after_s)))),
    }


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    """The REST error envelope."""
    body: dict[str, Any] = {"success": False, "error": {"code": code, "message": message}}
    if details is not None:
        body["error"]["details"] = details
    return body


def _did_you_mean(request: Request, error: Any) -> str:
    """For an unknown field of a JSON body, the known fields it is closest to (`; did you mean 'x'?`)."""
    import difflib

    loc = error.get("loc") or ()
    if error.get("type") != "extra_forbidden" or not loc or loc[0] != "body":
        return ""
    known = _body_fields(request, tuple(loc[1:-1]))
    given = str(loc[-1])
    # A field that differs only in case is the one meant; else the nearest spellings.
    close = [k for k in known if k.lower() == given.lower()] or difflib.get_close_matches(given, known, n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def _body_fields(request: Request, path: tuple[Any, ...]) -> list[str]:
    """The field names (and aliases) the route's body model takes at `path`."""
    from pydantic import BaseModel

    field = getattr(request.scope.get("route"), "body_field", None)
    model: Any = getattr(field, "type_", None) or getattr(getattr(field, "field_info", None), "annotation", None)
    for step in path:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return []
        info = model.model_fields.get(str(step)) or next(
            (f for f in model.model_fields.values() if f.alias == step), None
        )
        if info is None:
            return []  # a list index or a map key: the model below it is the item's
        model = info.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    return list(dict.fromkeys(n for name, f in model.model_fields.items() for n in (f.alias or name, name)))


def install(app: FastAPI) -> None:
    """Register the exception handlers."""

    @app.exception_handler(ToolAgentError)
    async def _toolagent(_: Request, exc: ToolAgentError) -> JSONResponse:
        code = error_code(exc)
        headers = rate_headers(exc)
        if code == "UNAUTHORIZED":
            # RFC 9110: a 401 says how to authenticate.
            headers["WWW-Authenticate"] = 'Bearer realm="toolagent"'
        return JSONResponse(error_body(code, exc.message), status_code=STATUS_BY_CODE.get(code, 500), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {
                "field": ".".join(str(p) for p in e["loc"] if p not in ("body", "query", "path")),
                "message": e["msg"] + _did_you_mean(request, e),
            }
            for e in exc.errors()
        ]
        message = "; ".join(f"{f['field'] or 'body'}: {f['message']}" for f in fields)
        return JSONResponse(error_body("BAD_REQUEST", message, fields), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = next((c for c, s in STATUS_BY_CODE.items() if s == exc.status_code), "INTERNAL_SERVER_ERROR")
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse(error_body("INTERNAL_SERVER_ERROR", "internal error; see the server log"), status_code=500)
