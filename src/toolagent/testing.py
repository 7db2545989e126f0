"""Helpers for testing code built on toolagent (and toolagent itself).

- `StubToolSource`: an innermost tool source whose tools are plain Python functions, with the
  calls it received; stack the layers over it with `toolagent.tools.stack.build_tool_stack`.
- `in_memory_pool`: MCP servers (`mcp.server.mcpserver.MCPServer`) run
  in this process over the SDK's in-memory transport, behind a real `ServerPool`.
- `temp_store`: a migrated SQLite store in a temporary directory.
- `test_runtime`: a started `Runtime` over a store (and optionally a pool) with one user.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engine.config import EngineConfig
from .engine.registry import Registry
from .errors import UnknownTool
from .model.entry import ToolEntry
from .model.spec import ToolResult, ToolSpec, split_name
from .tools.base import CallContext, CallOutcome, ToolCall, ToolSource, result_outcome

if TYPE_CHECKING:
    from .engine.principals import Principal
    from .mcp.pool import ServerPool
    from .runtime import Runtime
    from .store import Store

#: A stub tool: arguments in; a `ToolResult`, a dict (structured content) or text out; may be async.
Handler = Callable[[dict[str, Any]], Any]
#: An engine config with no rate limit on any plan.
UNLIMITED = {"plans": {p: {"rate_per_minute": None} for p in ("free", "starter", "team", "enterprise")}}


def as_result(value: Any) -> ToolResult:
    """A handler's return value as a `ToolResult` (dicts become structured content)."""
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, dict):
        text = json.dumps(value, default=str)
        return ToolResult(False, value, [{"type": "text", "text": text}], text)
    text = "" if value is None else str(value)
    return ToolResult(False, None, [{"type": "text", "text": text}], text)


class StubToolSource(ToolSource):
    """Tools that are Python functions, classified like MCP tools; records every call it gets."""

    def __init__(self, config: EngineConfig | None = None) -> None:
        """Args:
        config: Operator overrides for the classification (category, risk, enabled).
        """
        self.registry = Registry(config)
        self._handlers: dict[str, Handler] = {}
        self._specs: list[ToolSpec] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """`(tool, arguments)` of every call that reached this source, in order."""

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        risk: str | None = "safe",
        category: str | None = None,
        input_schema: dict[str, Any] | None = None,
        takes_sql: bool = False,
        timeout_s: float | None = None,
        annotations: dict[str, Any] | None = None,
        trusted: bool = False,
    ) -> ToolSpec:
        """Add a tool named `server/tool`; returns its spec."""
        server, tool = split_name(name)
        spec = ToolSpec(
            name=name,
            server=server,
            tool=tool,
            input_schema=input_schema or {"type": "object"},
            risk=risk,
            category=category,
            takes_sql=takes_sql,
            timeout_s=timeout_s,
            annotations=annotations or {},
            trusted=trusted,
        )
        self._handlers[name] = handler
        self._specs = [s for s in self._specs if s.name != name] + [spec]
        self.registry.update(self._specs)
        return spec

    async def list_tools(self, ctx: CallContext | None = None) -> dict[str, ToolEntry]:
        """Every stub tool, classified."""
        return {e.name: e for e in self.registry.entries()}

    async def resolve(self, name: str) -> ToolEntry:
        """The stub tool named `name`.

        Raises:
            UnknownTool: no such stub.
        """
        entry = self.registry.get(name)
        if entry is None:
            raise UnknownTool(f"no stub tool '{name}'; stubs: {', '.join(sorted(self._handlers)) or 'none'}")
        return entry

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Run the handler (its exceptions propagate, as a transport's would)."""
        self.calls.append((call.name, dict(call.arguments)))
        value = self._handlers[call.name](dict(call.arguments))
        if inspect.isawaitable(value):
            value = await value
        return result_outcome(call, as_result(value))


def in_memory_pool(servers: Mapping[str, Any], options: Mapping[str, Mapping[str, Any]] | None = None) -> ServerPool:
    """A `ServerPool` (not entered) over in-process MCP servers (`mcp.server.mcpserver.MCPServer`).

    Args:
        servers: server name -> an `MCPServer`.
        options: server name -> extra mcp.json settings (`risk`, `category`, `sql_tools`, ...).
    """
    from .mcp.config import ServersConfig
    from .mcp.pool import ServerPool

    config = ServersConfig.from_data(
        {"mcpServers": {name: {"command": "in-memory", **dict((options or {}).get(name, {}))} for name in servers}}
    )

    @contextlib.asynccontextmanager
    async def connect(params: Any, *, errlog: Any, message_handler: Any = None, **_: Any) -> AsyncIterator[Any]:
        from mcp import Client

        name = next(n for n, p in config.enabled.items() if p is params)
        async with Client(servers[name], message_handler=message_handler) as client:
            yield client.session

    return ServerPool(config, connector=connect)


@contextlib.asynccontextmanager
async def temp_store(directory: str | Path | None = None) -> AsyncIterator[Store]:
    """A migrated SQLite store in `directory` (default: a temporary directory removed afterwards)."""
    from .store import open_store

    with contextlib.ExitStack() as stack:
        folder = Path(directory) if directory is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        async with open_store(f"sqlite+aiosqlite:///{folder / 'store.db'}") as store:
            yield store


@contextlib.asynccontextmanager
async def test_runtime(
    store: Store,
    pool: ServerPool | None = None,
    *,
    user: str = "tester",
    level: str = "admin",
    plan: str = "enterprise",
    config: EngineConfig | None = None,
    **options: Any,
) -> AsyncIterator[tuple[Runtime, Principal]]:
    """A started runtime over `store` (and `pool`, entered here) and a user to call as.

    The config defaults to no rate limits (`UNLIMITED`), so tests count nothing by accident.
    """
    from .runtime import Runtime

    async with contextlib.AsyncExitStack() as stack:
        if pool is not None:
            await stack.enter_async_context(pool)
        runtime = await stack.enter_async_context(
            Runtime(store, config=config or EngineConfig.from_data(UNLIMITED), pool=pool, **options)
        )
        principal = await runtime.principals.add_user(user, level=level, plan=plan)
        yield runtime, principal


__all__ = ["UNLIMITED", "StubToolSource", "as_result", "in_memory_pool", "temp_store", "test_runtime"]

# A helper module, not a test module: keep pytest from collecting `test_runtime` as a test.
test_runtime.__test__ = False  # type: ignore[attr-defined]
