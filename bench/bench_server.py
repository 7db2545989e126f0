"""Benchmark MCP server: many echo and sleep tools (echo_0..echo_N, sleep_0..sleep_N).

Run: python bench/bench_server.py stdio 0 N   |   python bench/bench_server.py http PORT N
(N tools of each kind, default 50; the port is read but unused over stdio.)
"""

from __future__ import annotations

import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

TOOL_COUNT = int(sys.argv[3]) if len(sys.argv) > 3 else 50
server = MCPServer("bench", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)


def _register(i: int) -> None:
    def echo(text: str) -> str:
        return text

    async def sleep(ms: int = 50) -> str:
        await anyio.sleep(ms / 1000)
        return f"slept {ms}"

    server.add_tool(echo, name=f"echo_{i}", description=f"Echo text back ({i}).", annotations=READ_ONLY)
    server.add_tool(sleep, name=f"sleep_{i}", description=f"Sleep `ms` milliseconds ({i}).", annotations=READ_ONLY)


for n in range(TOOL_COUNT):
    _register(n)

if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
