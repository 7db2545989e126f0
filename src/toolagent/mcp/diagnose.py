"""What a failing server said: the lines of its stderr that say why, and its HTTP error answers.

The SDK turns an HTTP error answer into a bare JSON-RPC error ("Server returned an error
response", "Session terminated"), dropping the status and the body. `HttpTrace` is an httpx
response hook that keeps them, so errors can name the URL, the status and the body's first line,
and the pool can tell a session the server no longer knows (it restarted) from a failed call.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx2

#: Lines of a server's stderr kept in an error message.
STDERR_MAX_LINES = 12
#: Characters of a server's stderr kept in an error message.
STDERR_MAX_CHARS = 1500
#: Characters of an HTTP error body's first line kept.
BODY_LINE_MAX_CHARS = 300

# Lines that say why a process failed, in the words Node, Python and most CLIs use.
_WHY = re.compile(
    r"error|cannot|can't|could not|couldn't|unable|not found|no such|denied|refused|fatal|exception"
    r"|traceback|failed|missing|invalid|usage:|unknown|not allowed|^\s*code: '",
    re.IGNORECASE,
)
_STACK = re.compile(r"^\s+(at |File \")")


def stderr_summary(text: str, *, max_lines: int = STDERR_MAX_LINES, limit: int = STDERR_MAX_CHARS) -> str:
    """The lines of a server's stderr that say why it failed.

    Keeps every line naming an error (with the first frame of the stack under it) and the last
    three lines, in their order, with `…` where lines were left out. A failing Node server prints
    `Error: Cannot find module '…'` far above its last lines (the stack, `code: 'MODULE_NOT_FOUND'`,
    the Node version), so the last lines alone lose the reason.
    """
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    why = []
    for i, line in enumerate(lines):
        if _WHY.search(line) and not _STACK.match(line):
            why.append(i)
            if i + 1 < len(lines) and _STACK.match(lines[i + 1]):
                why.append(i + 1)
    tail = list(range(max(0, len(lines) - 3), len(lines)))
    keep = sorted(set(why[: max(1, max_lines - len(tail))]) | set(tail))
    out: list[str] = []
    last = -1
    for i in keep:
        if i != last + 1:
            out.append("…")
        out.append(lines[i].strip() if _STACK.match(lines[i]) else lines[i])
        last = i
    text = "\n".join(out)
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(frozen=True)
class HttpFailure:
    """One HTTP error answer to a POST of the MCP client."""

    seq: int
    """Order of arrival within the trace."""
    url: str
    """The URL posted to."""
    status: int
    """The HTTP status."""
    first_line: str
    """The first non-empty line of the body (a JSON-RPC error's message when the body is one)."""
    method: str | None
    """The JSON-RPC method posted (`initialize`, `tools/call`, ...)."""
    tool: str | None
    """For `tools/call`, the tool's name."""
    had_session: bool
    """The request carried an `Mcp-Session-Id` header."""

    def describe(self) -> str:
        """`HTTP 403 from http://…/mcp: Access is only allowed at localhost:8931`."""
        return f"HTTP {self.status} from {self.url}" + (f": {self.first_line}" if self.first_line else "")

    @property
    def session_refused(self) -> bool:
        """The server did not know the session, so it ran nothing: safe to re-initialize and resend.

        404 is the protocol's "start a new session" answer; servers built on the TypeScript SDK
        answer 400 "Server not initialized" when a restarted process sees an old session id.
        """
        if not self.had_session:
            return False
        if self.status == 404:
            return True
        lowered = self.first_line.lower()
        return self.status == 400 and ("session" in lowered or "initializ" in lowered)


class HttpTrace:
    """httpx response hook recording the HTTP error answers of one connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.seq = 0
        self.failures: list[HttpFailure] = []

    async def on_response(self, response: httpx2.Response) -> None:
        """Record an error answer to a POST (the hook httpx calls before the SDK reads it)."""
        request = response.request
        if response.status_code < 400 or request.method != "POST":
            return
        try:
            # Reading here caches the body; the SDK's own read gets the same bytes.
            body = (await response.aread()).decode("utf-8", errors="replace")
        except httpx2.HTTPError:
            body = ""
        method, tool = _rpc(request)
        self.seq += 1
        self.failures = [
            *self.failures[-15:],
            HttpFailure(
                seq=self.seq,
                url=str(request.url),
                status=response.status_code,
                first_line=_first_line(body),
                method=method,
                tool=tool,
                had_session="mcp-session-id" in request.headers,
            ),
        ]

    def since(self, mark: int, *, method: str | None = None, tool: str | None = None) -> HttpFailure | None:
        """The latest failure after `mark` (a former `seq`), for that method and tool when given."""
        for failure in reversed(self.failures):
            if failure.seq <= mark:
                return None
            if (method is None or failure.method == method) and (tool is None or failure.tool == tool):
                return failure
        return None


def _rpc(request: httpx2.Request) -> tuple[str | None, str | None]:
    try:
        message: Any = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return None, None
    if not isinstance(message, dict):
        return None, None
    params = message.get("params")
    tool = params.get("name") if isinstance(params, dict) and message.get("method") == "tools/call" else None
    return message.get("method"), tool if isinstance(tool, str) else None


def _first_line(body: str) -> str:
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            body = error["message"]
        elif isinstance(parsed.get("message"), str):
            body = parsed["message"]
    line = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    return line[:BODY_LINE_MAX_CHARS]
