"""Checks at the HTTP edge: inputs that no database, template or tool can take are refused with a
400 naming the field, before any route sees them, identically on SQLite and PostgreSQL.

Refused anywhere in a path segment, a query parameter or a JSON body (keys included):

- a NUL character (PostgreSQL text and JSON cannot hold it; SQLite would store it silently);
- a lone UTF-16 surrogate (`"\\ud800"` in JSON): it has no UTF-8 form, so it cannot be stored,
  logged or sent to a tool;
- in JSON bodies also: text that is not JSON, `NaN` / `Infinity` and numbers too large for a
  double, integers past 64 bits, and nesting deeper than `MAX_JSON_DEPTH`.
"""

from __future__ import annotations

import json
import math
from typing import Any
from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: Deepest nesting of arrays and objects a JSON body may have.
MAX_JSON_DEPTH = 64
#: Largest magnitude of a JSON integer (a signed 64-bit value, what databases and tools agree on).
MAX_JSON_INT = 2**63 - 1


class EdgeProblem(ValueError):
    """An input refused at the edge: `field` names it (`payload.text`, `path`, `query.org`)."""

    def __init__(self, field: str, message: str, *, unparsable: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.unparsable = unparsable
        """The text is not JSON at all (tRPC's PARSE_ERROR), rather than JSON holding a refused value."""


def _refuse_constant(name: str) -> Any:
    raise EdgeProblem("", f"{name} is not a JSON number: send a finite number or a string")


def _text_problem(value: str) -> str | None:
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which cannot be stored: remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (e.g. \\ud800), which is not text: send valid Unicode"
    return None


def check_text(value: str, field: str) -> None:
    """Refuse a string with a NUL character or a lone surrogate.

    Raises:
        EdgeProblem: naming `field`.
    """
    problem = _text_problem(value)
    if problem is not None:
        raise EdgeProblem(field, problem)


def _join(field: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else key


def check_value(value: Any, field: str = "") -> None:
    """Walk parsed JSON (without recursion) and refuse what `parse_json` describes.

    Raises:
        EdgeProblem: the first offending value, naming its path (`payload.items[2].name`).
    """
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, where or "body")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INT:
                raise EdgeProblem(where or "body", f"integer {str(item)[:20]}... is larger than 64 bits: "
                                  "send it as a string")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise EdgeProblem(where or "body", "number is too large for a double (or not finite): "
                                  "send a smaller number or a string")
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise EdgeProblem(where or "body", f"nested deeper than {MAX_JSON_DEPTH} levels: flatten the value")
            entries = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in entries:
                if isinstance(key, str):
                    problem = _text_problem(key)
                    if problem is not None:
                        raise EdgeProblem(where or "body", f"a key {problem}")
                stack.append((child, _join(where, key), depth + 1))


def parse_json(raw: bytes | str, field: str = "body") -> Any:
    """Parse JSON text and check it with `check_value`.

    Raises:
        EdgeProblem: not UTF-8, not JSON, or a refused value; `field` prefixes the path.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EdgeProblem(field, f"is not UTF-8 (byte {exc.start}): send UTF-8 encoded JSON",
                              unparsable=True) from None
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except EdgeProblem as exc:
        raise EdgeProblem(field, exc.message) from None
    except RecursionError:
        raise EdgeProblem(field, f"nested deeper than {MAX_JSON_DEPTH} levels: flatten the value") from None
    except json.JSONDecodeError as exc:
        raise EdgeProblem(field, f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                          unparsable=True) from None
    except ValueError:  # an integer of more digits than Python converts
        raise EdgeProblem(field, "holds an integer of thousands of digits: send it as a string") from None
    check_value(value, "" if field == "body" else field)
    return value


def _wants_json(scope: Scope) -> bool:
    for name, value in scope.get("headers") or ():
        if name == b"content-type":
            return b"json" in value.lower()
    return True  # no content type: the routes read the body as JSON anyway


def check_request(scope: Scope) -> None:
    """Refuse a bad path segment or query parameter.

    Raises:
        EdgeProblem: naming `path` (and the segment) or `query.<name>`.
    """
    for segment in str(scope.get("path", "")).split("/"):
        problem = _text_problem(segment)
        if problem is not None:
            shown = json.dumps(segment)[1:-1]  # escaped: the segment itself holds the bad character
            raise EdgeProblem("path", f"segment '{shown}' {problem}")
    query = scope.get("query_string", b"")
    if query:
        for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
            check_text(key, "query")
            check_text(value, f"query.{key}")


class EdgeCheck:
    """ASGI middleware answering 400 to requests `check_request` or `parse_json` refuses.

    Install it inside `BodyLimit`: it reads the whole body, which only that bounds.
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
        except EdgeProblem as exc:
            await _refuse(scope, send, exc)
            return
        messages: list[Message] = []
        body = bytearray()
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        if body.strip(b" \t\r\n") and _wants_json(scope):
            try:
                parse_json(bytes(body))
            except EdgeProblem as exc:
                await _refuse(scope, send, exc)
                return

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(scope: Scope, send: Send, exc: EdgeProblem) -> None:
    field = exc.field or "body"
    message = f"{field}: {exc.message}"
    details = [{"field": field, "message": exc.message}]
    if str(scope.get("path", "")).startswith("/trpc/"):
        from .trpc import error_shape  # tRPC clients read their own error shape

        answer: dict[str, Any] = error_shape("BAD_REQUEST", message, None, fields=details)
    else:
        answer = {"success": False, "error": {"code": "BAD_REQUEST", "message": message, "details": details}}
    # ASCII escapes: the message may quote the offending character.
    body = json.dumps(answer, ensure_ascii=True).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_INT", "EdgeCheck", "EdgeProblem", "check_request", "check_text", "check_value",
           "parse_json"]
