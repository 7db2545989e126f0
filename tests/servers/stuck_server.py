"""An MCP server that gets stuck in its one call: `busy` blocks the whole process for `seconds`,
so it reads neither the call's cancellation nor the end of its stdin meanwhile, and it ignores
SIGTERM; only SIGKILL stops it early. For the tests of how stuck and orphaned servers are stopped.

Run: python tests/servers/stuck_server.py. Events go to the file (or FIFO) in PROBE_LOG, one JSON
line each, as the probe server writes them.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("stuck", log_level="WARNING")


def note(event: str, **fields: Any) -> None:
    path = os.environ.get("PROBE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields}) + "\n")


@server.tool(name="busy", annotations=ToolAnnotations(read_only_hint=True))
async def busy(seconds: float) -> str:
    """Block the whole server for `seconds`, ignoring SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note("call", tool="busy", seconds=seconds)
    time.sleep(seconds)  # blocks the event loop: no cancellation, no end of stdin is read
    note("done", tool="busy")
    return "done"


if __name__ == "__main__":
    server.run("stdio")
