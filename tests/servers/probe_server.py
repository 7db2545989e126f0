"""A small MCP server for the runner's tests: structured results, chaining, failures, sleeps, crashes.

Run: python tests/servers/probe_server.py [stdio | http PORT]. Calls are appended to the file in
PROBE_LOG (one JSON line per event) so tests can see what reached the server, including
cancellations.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("probe", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)


def note(event: str, **fields: Any) -> None:
    path = os.environ.get("PROBE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields}) + "\n")


class Number(BaseModel):
    value: float
    label: str


class Doubled(BaseModel):
    value: float
    doubled_from: float


class Echoed(BaseModel):
    text: str
    length: int


@server.tool(name="echo", annotations=READ_ONLY)
def echo(text: str) -> Echoed:
    """Echo text back with its length."""
    note("call", tool="echo", text=text)
    return Echoed(text=text, length=len(text))


@server.tool(name="make-number", annotations=READ_ONLY)
def make_number(value: float, label: str = "n") -> Number:
    """Return a number (a chain's first step)."""
    note("call", tool="make-number", value=value)
    return Number(value=value, label=label)


@server.tool(name="double", annotations=READ_ONLY)
def double(value: float) -> Doubled:
    """Double `value` (required: chained implicitly from a previous step's `value`)."""
    note("call", tool="double", value=value)
    return Doubled(value=value * 2, doubled_from=value)


@server.tool(name="add", annotations=READ_ONLY)
def add(a: float, b: float) -> Number:
    """Add two numbers."""
    note("call", tool="add", a=a, b=b)
    return Number(value=a + b, label="sum")


@server.tool(name="fail")
def fail(message: str = "deliberate failure") -> str:
    """Always fail (the result has isError)."""
    note("call", tool="fail")
    raise ToolError(message)


@server.tool(name="sleep", annotations=READ_ONLY)
async def sleep(seconds: float, tag: str = "") -> Echoed:
    """Sleep, then answer; records a cancellation if one arrives first."""
    note("call", tool="sleep", seconds=seconds, tag=tag)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        note("cancelled", tool="sleep", tag=tag)
        raise
    return Echoed(text=tag or "slept", length=int(seconds * 1000))


@server.tool(name="query")
def query(sql: str) -> Echoed:
    """Pretend to run SQL (the runner guards it when the config lists this tool in sql_tools)."""
    note("call", tool="query", sql=sql)
    return Echoed(text=sql, length=len(sql))


@server.tool(name="crash")
def crash() -> str:
    """Exit the server process at once (a server lost mid-run)."""
    note("call", tool="crash")
    os._exit(3)


@server.tool(name="add-tool")
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool `name` (it answers "dynamic") and tell the client the list changed."""

    def dynamic() -> str:
        return "dynamic"

    server.add_tool(dynamic, name=name, description="Added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool(name="pid", annotations=READ_ONLY)
def pid() -> Number:
    """The server's process id (proves session reuse)."""
    return Number(value=os.getpid(), label="pid")


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
