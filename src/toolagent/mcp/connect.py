"""`connect(params)`: the one place that knows transport details (stdio, streamable HTTP)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import IO, Any, TextIO, cast

import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from .checked_session import CheckedSession
from .config import HttpServer, ServerParams, StdioServer
from .diagnose import HttpTrace

CLIENT_INFO = Implementation(name="toolagent", version="0.1.0")


@contextlib.asynccontextmanager
async def connect(
    params: ServerParams,
    *,
    errlog: IO[str],
    message_handler: MessageHandlerFnT | None = None,
    http_timeout_s: float = 300.0,
    trace: HttpTrace | None = None,
) -> AsyncIterator[ClientSession]:
    """Open a transport and an initialized `ClientSession` over it.

    Args:
        params: the server's configuration.
        errlog: where a stdio server's stderr goes.
        message_handler: receives server notifications (e.g. tools/list_changed).
        http_timeout_s: read timeout of the HTTP client; per-call timeouts are enforced above it.
        trace: records the HTTP error answers of the connection (status, body), which the SDK drops.
    """
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(params, StdioServer):
            server = StdioServerParameters(command=params.command, args=params.args, env=params.env, cwd=params.cwd)
            read, write = await stack.enter_async_context(stdio_client(server, errlog=cast(TextIO, errlog)))
        else:
            assert isinstance(params, HttpServer)
            hooks = {"response": [trace.on_response]} if trace is not None else {}
            client = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=params.headers,
                    timeout=httpx2.Timeout(30.0, read=http_timeout_s),
                    event_hooks=hooks,
                )
            )
            read, write = await stack.enter_async_context(
                streamable_http_client(params.url, http_client=client, terminate_on_close=True)
            )
        kwargs: dict[str, Any] = {"client_info": CLIENT_INFO}
        if message_handler is not None:
            kwargs["message_handler"] = message_handler
        session = await stack.enter_async_context(CheckedSession(read, write, **kwargs))
        await session.initialize()
        yield session
