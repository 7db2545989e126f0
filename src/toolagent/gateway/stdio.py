"""The gateway over stdio, for a local client that starts `toolagent gateway --stdio` itself.

The caller is fixed for the process: `--user`, else the local user; there is no API key, so the
user's level (and the operator's rules) decide what is listed and run.
"""

from __future__ import annotations

from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

from ..engine.principals import Principal
from ..runtime import Runtime
from .server import Caller, Gateway


def stdio_gateway(runtime: Runtime, principal: Principal) -> Gateway:
    """A gateway whose every request acts as `principal`."""
    caller = Caller(principal)

    async def caller_of(ctx: ServerRequestContext[Any, Any]) -> Caller:
        return caller

    return Gateway(runtime, caller_of)


async def serve_stdio(gateway: Gateway) -> None:
    """Serve `gateway` over this process's stdin and stdout until the client closes them."""
    async with stdio_server() as (read, write):
        await gateway.server.run(read, write, gateway.server.create_initialization_options())


__all__ = ["serve_stdio", "stdio_gateway"]
