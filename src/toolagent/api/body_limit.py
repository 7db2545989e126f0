"""A cap on request body size, enforced while the body is read.

A body larger than the cap is answered 413 without being read to its end: a declared
`Content-Length` over the cap is refused before a byte of the body is read, and a chunked body
is refused as soon as the bytes read so far pass the cap. Nothing of the body is echoed back.
Bodies within the cap are buffered (at most the cap) and handed to the app unchanged, in one
message; the buffered bytes are also left in the scope under `BODY_SCOPE_KEY`, so the edge checks
inside read them from there instead of buffering the body a second time.

The cap is `TOOLAGENT_MAX_BODY_BYTES` (default 1 MiB), or `create_app(max_body_bytes=...)`.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import ConfigError
from ..settings import Settings

#: Largest request body accepted, in bytes, unless configured otherwise.
DEFAULT_MAX_BODY_BYTES = 1024 * 1024
#: The environment variable that sets the cap.
MAX_BODY_ENV = "TOOLAGENT_MAX_BODY_BYTES"
#: Scope key under which the buffered request body is handed to the middleware inside.
BODY_SCOPE_KEY = "toolagent.body"


def max_body_bytes_of(settings: Settings) -> int:
    """`TOOLAGENT_MAX_BODY_BYTES` as a positive integer, else the default.

    Raises:
        ConfigError: a value that is not a positive integer.
    """
    raw = (settings.max_body_bytes or "").strip()
    if not raw:
        return DEFAULT_MAX_BODY_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(f"{MAX_BODY_ENV}={raw!r}: expected a positive number of bytes, e.g. {DEFAULT_MAX_BODY_BYTES}")
    return value


class BodyLimit:
    """ASGI middleware answering 413 to HTTP requests whose body exceeds `max_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or answer 413 when its body passes the cap."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send, f"declares {declared} bytes")
            return
        # Buffered here rather than wrapped: the app then never sees part of an oversized body, and
        # the refusal can always be sent (no response has started).
        chunks: list[bytes] = []
        size = 0
        pending: list[Message] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                pending.append(message)  # a disconnect: handed on after the body read so far
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, f"passed {self.max_bytes} bytes")
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        scope[BODY_SCOPE_KEY] = body
        pending.insert(0, {"type": "http.request", "body": body, "more_body": False})

        async def replay() -> Message:
            if pending:
                return pending.pop(0)
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send, what: str) -> None:
        limit = self.max_bytes
        body = json.dumps(
            {
                "success": False,
                "error": {
                    "code": "PAYLOAD_TOO_LARGE",
                    "message": f"request body {what}; the limit is {limit} bytes ({MAX_BODY_ENV}): send a smaller body, "
                    f"or raise {MAX_BODY_ENV} on the server",
                    "details": {"limitBytes": limit, "setting": MAX_BODY_ENV},
                },
            }
        ).encode()
        headers: list[tuple[bytes, bytes]] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            # The unread rest of the body makes the connection unusable for another request.
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    headers: Any = scope.get("headers") or ()
    for name, value in headers:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


__all__ = ["BODY_SCOPE_KEY", "DEFAULT_MAX_BODY_BYTES", "MAX_BODY_ENV", "BodyLimit", "max_body_bytes_of"]
