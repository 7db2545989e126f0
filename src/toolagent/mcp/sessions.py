"""Live MCP sessions, one per configured server per process, opened lazily and shared.

Each connection is owned by a task in the pool's task group, because the SDK's transports are
context managers that must be entered and exited by the same task; callers from any task use
the shared `ClientSession`, which multiplexes requests by id. A connection that breaks is
dropped and reopened on its next use, and one server's failure never touches the others. A
server that does not start within its connect timeout is not waited for again until that long
has passed, so a CLI build that lists the agent's servers and then calls one waits once.
Leaving the pool closes every connection (for stdio: stdin closed, then the process tree is
terminated by the SDK), so no server process outlives it. Listing and calling tools over these
sessions is `mcp.pool`'s business.
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, Self

import anyio
import anyio.abc
from mcp import ClientSession, MCPError
from mcp.types import Tool, ToolListChangedNotification

from ..errors import ServerUnavailable
from ..model.spec import ToolSpec
from .config import HttpServer, ServerParams, ServersConfig
from .connect import connect
from .diagnose import HttpTrace, stderr_summary

log = logging.getLogger(__name__)

#: How long opening a connection (process start + initialize) may take.
DEFAULT_CONNECT_TIMEOUT_S = 60.0
#: A server still starting after this long is announced through `on_starting`.
STARTING_NOTICE_S = 1.0
#: Told a server's name and its connect timeout when its start takes longer than `STARTING_NOTICE_S`.
StartingCallback = Callable[[str, float], None]


@dataclass(eq=False)
class ServerConnection:
    """One configured server: its live session (if open), its cached tool list and its stderr."""

    name: str
    params: ServerParams
    errlog: IO[str]
    session: ClientSession | None = None
    tools: dict[str, Tool] | None = None
    specs: dict[str, ToolSpec] = field(default_factory=dict)
    stop: anyio.Event = field(default_factory=anyio.Event)
    closed: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    generation: int = 0
    trace: HttpTrace | None = None
    timed_out: tuple[float, str] | None = None  # (monotonic deadline, message) of the last start that hung

    def stderr_tail(self) -> str:
        """What the server printed to stderr that says why it failed (see `stderr_summary`)."""
        try:
            self.errlog.flush()
            self.errlog.seek(0)
            text = self.errlog.read()
            self.errlog.seek(0, 2)
        except (OSError, ValueError):
            return ""
        return stderr_summary(text)


class SessionPool:
    """Lazily opened, shared sessions to every enabled server of a `ServersConfig`.

    Use as an async context manager; `session` may be used from any task inside it.
    """

    def __init__(
        self,
        config: ServersConfig,
        *,
        connect_timeout_s: float | None = None,
        on_starting: StartingCallback | None = None,
        connector: Callable[..., Any] | None = None,
    ) -> None:
        """Args:
        config: the servers.
        connect_timeout_s: default start-up limit of servers that set no `connect_timeout_s`
            (else the config file's top-level one, else `DEFAULT_CONNECT_TIMEOUT_S`).
        on_starting: told when a server takes more than `STARTING_NOTICE_S` to start.
        connector: opens a session for a server's params (default `connect`); tests pass an
            in-process one (`toolagent.testing.in_memory_pool`).
        """
        self.config = config
        self.connect_timeout_s = connect_timeout_s or config.connect_timeout_s or DEFAULT_CONNECT_TIMEOUT_S
        self.on_starting = on_starting
        self.connector = connector
        self._servers: dict[str, ServerConnection] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._stack = contextlib.AsyncExitStack()
        self.connects = 0  #: sessions opened so far (a test reads it to prove reuse)

    async def __aenter__(self) -> Self:
        tg = anyio.create_task_group()
        await self._stack.enter_async_context(tg)
        self._tg = tg
        for name, params in self.config.enabled.items():
            errlog = self._stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
            trace = HttpTrace(params.url) if isinstance(params, HttpServer) else None
            self._servers[name] = ServerConnection(name, params, errlog, trace=trace)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        for server in self._servers.values():
            server.stop.set()
        try:
            # The body's own error is not handed to the task group, which would wrap it in an
            # exception group; it propagates unchanged once every connection has closed.
            await self._stack.__aexit__(None, None, None)
        finally:
            self._tg = None

    # -- connections ---------------------------------------------------------------------------

    @property
    def server_names(self) -> list[str]:
        """Enabled servers, in config order (known before the pool is entered)."""
        return list(self.config.enabled)

    def origin(self, namespace: str) -> str:
        """How a server is reached, for messages: "MCP server 'x' (stdio)"."""
        params = self.config.mcpServers.get(namespace)
        return f"MCP server '{namespace}'" + (f" ({params.transport})" if params is not None else "")

    def _server(self, namespace: str) -> ServerConnection:
        server = self._servers.get(namespace)
        if server is None:
            known = ", ".join(self._servers) or "none configured"
            disabled = namespace in self.config.mcpServers
            why = (
                "it is disabled in the server config"
                if disabled
                else f"no server named '{namespace}' (configured: {known})"
            )
            raise ServerUnavailable(namespace, why)
        return server

    async def session(self, namespace: str) -> ClientSession:
        """The live session of a server, opening it on first use or after it broke.

        Raises:
            ServerUnavailable: the server is unknown, disabled, or failed to start.
        """
        server = self._server(namespace)
        current = server.session
        if current is not None:
            if not transport_closed(current):
                return current
            await self._drop(server, current)
        async with server.lock:
            if server.session is None:
                await self._open(server)
            assert server.session is not None
            return server.session

    def connect_timeout_for(self, namespace: str) -> float:
        """The start-up limit of one server: its own `connect_timeout_s`, else the pool's."""
        return self._server(namespace).params.connect_timeout_s or self.connect_timeout_s

    async def _open(self, server: ServerConnection) -> None:
        assert self._tg is not None, "use the pool as an async context manager"
        if server.timed_out is not None:
            until, message = server.timed_out
            if time.monotonic() < until:
                raise ServerUnavailable(server.name, message)
            server.timed_out = None
        server.stop = anyio.Event()
        server.closed = anyio.Event()
        server.tools = None
        limit = server.params.connect_timeout_s or self.connect_timeout_s
        mark = server.trace.seq if server.trace is not None else 0
        notice = anyio.CancelScope()
        if self.on_starting is not None:
            self._tg.start_soon(self._announce, notice, server.name, limit)
        try:
            with anyio.fail_after(limit):
                await self._tg.start(self._own, server)
        except TimeoutError as exc:
            message = (
                f"no answer within {limit:g} s (raise `connect_timeout_s` in the server config if it starts slowly)"
            )
            tail = server.stderr_tail()
            message += f"; server stderr: {tail}" if tail else ""
            server.timed_out = (time.monotonic() + limit, message)
            raise ServerUnavailable(server.name, message) from exc
        except Exception as exc:  # noqa: BLE001 - any transport failure means "unavailable", with its cause
            raise ServerUnavailable(server.name, self._why(server, exc, mark)) from exc
        finally:
            notice.cancel()
        self.connects += 1

    async def _announce(self, scope: anyio.CancelScope, name: str, limit: float) -> None:
        with scope:
            await anyio.sleep(STARTING_NOTICE_S)
            assert self.on_starting is not None
            self.on_starting(name, limit)

    @staticmethod
    def _why(server: ServerConnection, exc: BaseException, mark: int) -> str:
        """Why opening failed: the HTTP answer, the URL, or the server's stderr."""
        failure = server.trace.since(mark) if server.trace is not None else None
        if failure is not None:
            return failure.describe()
        cause = describe_error(exc)
        if isinstance(server.params, HttpServer):
            return f"{server.params.url}: {cause}"
        tail = server.stderr_tail()
        return cause + (f"; server stderr: {tail}" if tail else "")

    async def _own(self, server: ServerConnection, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        started = False

        async def on_message(message: Any) -> None:
            if isinstance(message, ToolListChangedNotification):
                server.tools = None
            elif isinstance(message, Exception):
                log.debug("server %s transport error: %s", server.name, message)

        try:
            opener: Callable[..., contextlib.AbstractAsyncContextManager[ClientSession]] = self.connector or connect
            extra = {"trace": server.trace} if server.trace is not None else {}
            async with opener(server.params, errlog=server.errlog, message_handler=on_message, **extra) as session:
                server.session = session
                server.generation += 1
                started = True
                task_status.started()
                await server.stop.wait()
        except Exception as exc:  # noqa: BLE001
            if not started:
                raise
            # After start-up a failure must not reach the pool's task group (it would cancel
            # every other server's work); the connection is dropped and reopened on next use.
            log.debug("server %s connection ended: %s", server.name, describe_error(exc))
        finally:
            server.session = None
            server.closed.set()

    async def _drop(self, server: ServerConnection, session: ClientSession) -> None:
        """Forget a broken session so the next use reconnects."""
        if server.session is session:
            server.session = None
            server.tools = None
            server.stop.set()
            with anyio.move_on_after(5, shield=True):
                await server.closed.wait()


def transport_closed(session: ClientSession) -> bool:
    """The session's transport reached EOF, so a request would never be delivered."""
    # The SDK marks its dispatcher closed once the transport reached EOF (e.g. the server process
    # exited while idle). Checking it lets the next call reconnect before sending anything,
    # instead of failing a request that was never delivered. Private, hence the defensive getattr.
    dispatcher = getattr(session, "_dispatcher", None)
    return bool(getattr(dispatcher, "_closed", False))


def describe_error(exc: BaseException) -> str:
    """A transport or MCP failure in one line (every member of an exception group)."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e) for e in exc.exceptions)
    text = str(exc) or type(exc).__name__
    if isinstance(exc, MCPError):
        return f"{exc.message} (code {exc.code})"
    return text


__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "STARTING_NOTICE_S",
    "ServerConnection",
    "SessionPool",
    "StartingCallback",
    "describe_error",
    "transport_closed",
]
