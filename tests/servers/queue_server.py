"""A small MCP server for the worker tests: every call is appended to QUEUE_LOG (one JSON line),
so a test counts what reached the server, whatever happened to the worker that called it.

Run: python tests/servers/queue_server.py (stdio).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("queue", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)


def note(event: str, **fields: Any) -> None:
    path = os.environ.get("QUEUE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields}) + "\n")


@server.tool(name="noop", annotations=READ_ONLY)
def noop(tag: str = "") -> str:
    """Answer at once."""
    note("call", tool="noop", tag=tag)
    return tag or "ok"


@server.tool(name="wait", annotations=READ_ONLY)
async def wait(seconds: float, tag: str = "") -> str:
    """Wait (I/O-bound work), noting a cancellation if one arrives first."""
    note("call", tool="wait", tag=tag)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        note("cancelled", tool="wait", tag=tag)
        raise
    return tag or "waited"


@server.tool(name="wait-once", annotations=READ_ONLY)
async def wait_once(marker: str, seconds: float = 60.0) -> str:
    """Wait long the first time (`marker` absent: a worker can be killed meanwhile), answer at once after."""
    first = not Path(marker).exists()
    note("call", tool="wait-once", first=first)
    if first:
        Path(marker).write_text("seen")
        await anyio.sleep(seconds)
    return "read"


@server.tool(name="write", annotations=WRITES)
async def write(tag: str, seconds: float = 0.0) -> str:
    """A write: noted as it arrives, then `seconds` of work before it answers."""
    note("call", tool="write", tag=tag)
    await anyio.sleep(seconds)
    note("done", tool="write", tag=tag)
    return f"wrote {tag}"


def _io_step(name: str) -> None:
    async def step(seconds: float = 0.05) -> str:
        """Wait `seconds` (a call that waits on I/O), for multi-step runs."""
        await anyio.sleep(seconds)
        return name

    server.add_tool(step, name=name, description="Wait, then answer (I/O-bound work).", annotations=READ_ONLY)


for _name in ("io-1", "io-2", "io-3", "io-4"):
    _io_step(_name)


if __name__ == "__main__":
    server.run("stdio")
