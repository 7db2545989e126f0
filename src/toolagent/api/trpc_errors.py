"""tRPC's error shape and codes, for the tRPC router and for the edge checks that refuse a request
before it reaches a router (a tRPC client reads only its own shape)."""

from __future__ import annotations

from typing import Any

#: tRPC's JSON-RPC error numbers (`TRPC_ERROR_CODES_BY_KEY` in @trpc/server).
TRPC_ERROR_CODES: dict[str, int] = {
    "PARSE_ERROR": -32700,
    "BAD_REQUEST": -32600,
    "INTERNAL_SERVER_ERROR": -32603,
    "UNAUTHORIZED": -32001,
    "FORBIDDEN": -32003,
    "NOT_FOUND": -32004,
    "METHOD_NOT_SUPPORTED": -32005,
    "CONFLICT": -32009,
    "UNSUPPORTED_MEDIA_TYPE": -32015,
    "TOO_MANY_REQUESTS": -32029,
}
#: HTTP status of each code (`JSONRPC2_TO_HTTP_CODE`).
HTTP_STATUS: dict[str, int] = {
    "PARSE_ERROR": 400,
    "BAD_REQUEST": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "METHOD_NOT_SUPPORTED": 405,
    "CONFLICT": 409,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "TOO_MANY_REQUESTS": 429,
    "INTERNAL_SERVER_ERROR": 500,
}


def error_shape(code: str, message: str, path: str | None, **extra: Any) -> dict[str, Any]:
    """tRPC's default error shape."""
    data: dict[str, Any] = {"code": code, "httpStatus": HTTP_STATUS.get(code, 500)}
    if path is not None:
        data["path"] = path
    data.update({k: v for k, v in extra.items() if v is not None})
    return {"error": {"message": message, "code": TRPC_ERROR_CODES.get(code, -32603), "data": data}}


__all__ = ["HTTP_STATUS", "TRPC_ERROR_CODES", "error_shape"]
