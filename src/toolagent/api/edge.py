"""Checks at the HTTP edge: inputs that no database, template or tool can take (see
`toolagent.inputs`) are refused with a 400 naming the field, before any route sees them,
identically on SQLite and PostgreSQL. Checked: every path segment, every query parameter, and a
JSON body (keys included).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..inputs import InputProblem, check_text, parse_json, text_problem
from .body_limit import BODY_SCOPE_KEY
from .trpc_errors import error_shape

#: Scope key under which a JSON body that passed the checks is handed on, parsed (read by the tRPC
#: endpoint, which would otherwise parse and check the same text again).
JSON_SCOPE_KEY = "toolagent.json"


def _wants_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # no content type: the routes read the body as JSON anyway


def check_request(scope: Scope) -> None:
    """Refuse a bad path segment or query parameter.

    Raises:
        InputProblem: naming `path` (and the segment) or `query.<name>`.
    """
    for segment in str(scope.get("path", "")).split("/"):
        problem = text_problem(segment)
        if problem is not None:
            shown = json.dumps(segment)[1:-1]  # escaped: the segment itself holds the bad character
            raise InputProblem("path", f"segment '{shown}' {problem}")
    query = scope.get("query_string", b"")
    if query:
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            check_text(key, "query")
            check_text(value, f"query.{key}")


class EdgeCheck:
    """ASGI middleware answering 400 to requests `check_request` or `parse_json` refuses.

    Install it inside `BodyLimit`: it checks the body that one buffered (and bounded); alone, it
    reads the whole body itself.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the request, then pass it on with its body unchanged."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            check_request(scope)
        except InputProblem as exc:
            await _refuse(scope, send, exc)
            return
        buffered = scope.get(BODY_SCOPE_KEY)
        messages: list[Message] = []
        if buffered is None:
            chunks: list[bytes] = []
            while True:
                message = await receive()
                messages.append(message)
                if message["type"] != "http.request":
                    break
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    break
            buffered = b"".join(chunks)
        if buffered.strip(b" \t\r\n") and _wants_json(scope):
            try:
                scope[JSON_SCOPE_KEY] = parse_json(buffered)
            except InputProblem as exc:
                await _refuse(scope, send, exc)
                return
        if not messages:
            await self.app(scope, receive, send)
            return

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(scope: Scope, send: Send, exc: InputProblem) -> None:
    field = exc.field or "body"
    message = f"{field}: {exc.message}"
    details = [{"field": field, "message": exc.message}]
    if str(scope.get("path", "")).startswith("/trpc/"):
        answer: dict[str, Any] = error_shape("BAD_REQUEST", message, None, fields=details)
    else:
        answer = {"success": False, "error": {"code": "BAD_REQUEST", "message": message, "details": details}}
    # ASCII escapes: the message may quote the offending character.
    body = json.dumps(answer, ensure_ascii=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["JSON_SCOPE_KEY", "EdgeCheck", "check_request"]
