"""`PUT /api/agents/{org}/{slug}` with `Content-Type: application/yaml`: the body is the agent
definition itself, handed on as the JSON record `{"yaml": <the text>}`, whose other fields then
default from the definition's `metadata` (see `routes_agents.put_agent`).

Installed inside `BodyLimit` (the YAML is bounded like any body) and outside `EdgeCheck` (which
then checks the text as it checks any JSON string), so the route sees one body format.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .body_limit import BODY_SCOPE_KEY
from .errors import error_body

#: The media types taken as YAML.
YAML_TYPES = frozenset({b"application/yaml", b"application/x-yaml", b"text/yaml", b"text/x-yaml"})
_AGENT_PATH = re.compile(r"^/api/agents/[^/]+/[^/]+/?$")


class YamlAgentBody:
    """ASGI middleware turning a YAML agent PUT into the JSON record the route takes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Rewrite a YAML agent PUT's body and content type; pass anything else on untouched."""
        if scope["type"] != "http" or scope.get("method") != "PUT" or not _AGENT_PATH.match(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        headers = list(scope.get("headers") or ())
        media = next((v.split(b";")[0].strip().lower() for k, v in headers if k == b"content-type"), b"")
        if media not in YAML_TYPES:
            await self.app(scope, receive, send)
            return
        raw = scope.get(BODY_SCOPE_KEY)
        if raw is None:
            raw = await _read_body(receive)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            await _answer_400(send, f"body: the YAML is not UTF-8 text (byte {exc.start}): send it as UTF-8")
            return
        body = json.dumps({"yaml": text}).encode()
        kept = [(k, v) for k, v in headers if k not in (b"content-type", b"content-length")]
        new_scope = {
            **scope,
            "headers": [*kept, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            BODY_SCOPE_KEY: body,
        }
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()  # after the body: the disconnect, when it comes
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(new_scope, replay, send)


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer_400(send: Send, message: str) -> None:
    payload = json.dumps(error_body("BAD_REQUEST", message, [{"field": "body", "message": message}])).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 400,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})


__all__ = ["YAML_TYPES", "YamlAgentBody"]
