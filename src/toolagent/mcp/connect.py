"""`connect(params)`: the one place that knows transport details (stdio, streamable HTTP)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, TextIO, cast

import anyio
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from .checked_session import CheckedSession
from .config import HttpServer, ServerParams, StdioServer
from .diagnose import HttpTrace
from .server_process import guarded, read_pid, stop_after_grace, supported

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
        pid_file: Path | None = None
        session: CheckedSession | None = None
        if isinstance(params, StdioServer):
            launch = None
            if supported():
                fd, name = tempfile.mkstemp(prefix="toolagent-mcp-", suffix=".pid")
                os.close(fd)
                pid_file = Path(name)
                stack.callback(pid_file.unlink, missing_ok=True)
                launch = guarded(params.command, list(params.args), env=params.env, cwd=params.cwd, pid_file=pid_file)
            command, args = launch or (params.command, list(params.args))
            # The stop of a server left busy in an abandoned call runs beside the SDK's own shutdown
            # (which waits seconds before it signals), and is cancelled once that shutdown is done.
            stopper = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(stopper.cancel_scope.cancel)
            server = StdioServerParameters(command=command, args=args, env=params.env, cwd=params.cwd)
            read, write = await stack.enter_async_context(stdio_client(server, errlog=cast(TextIO, errlog)))

            async def stop_if_abandoned() -> None:
                pid = read_pid(pid_file) if launch is not None and pid_file is not None else None
                if session is not None and session.abandoned_calls and pid is not None:
                    stopper.start_soon(stop_after_grace, pid)

            stack.push_async_callback(stop_if_abandoned)
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
