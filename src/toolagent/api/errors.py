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
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {"field": ".".join(str(p) for p in e["loc"] if p not in ("body", "query", "path")), "message": e["msg"]}
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
