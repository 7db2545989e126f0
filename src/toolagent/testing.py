"""Helpers for testing code built on toolagent (and toolagent itself).

- `StubToolSource`: an innermost tool source whose tools are plain Python functions, with the
  calls it received (a `FunctionSource` per namespace under a catalogue); stack the layers over
  it with `toolagent.tools.stack.build_tool_stack`.
- `in_memory_pool`: MCP servers (`mcp.server.mcpserver.MCPServer`) run
  in this process over the SDK's in-memory transport, behind a real `ServerPool`.
- `temp_store`: a migrated SQLite store in a temporary directory.
- `test_runtime`: a started `Runtime` over a store (and optionally a pool) with one user.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engine.config import EngineConfig
from .model.spec import ToolSpec, split_name
from .tools.catalogue import Catalogue
from .tools.combined import CombinedSource
from .tools.function_source import FunctionSource, FunctionTool, handler_result

if TYPE_CHECKING:
    from .engine.principals import Principal
    from .mcp.pool import ServerPool
    from .runtime import Runtime
    from .store import Store

#: A stub tool: arguments in; a `ToolResult`, a dict (structured content) or text out; may be async.
Handler = Callable[[dict[str, Any]], Any]
#: An engine config with no rate limit on any plan.
UNLIMITED = {"plans": {p: {"rate_per_minute": None} for p in ("free", "starter", "team", "enterprise")}}

#: A handler's return value as a `ToolResult` (dicts become structured content).
as_result = handler_result


class StubToolSource(Catalogue):
    """Tools that are Python functions, classified like MCP tools; records every call it gets.

    It is the production path with test conveniences: a catalogue over one `FunctionSource` per
    namespace, each tool a handler taking the arguments dict (its exceptions propagate, as a
    transport's would). For tools made from functions' signatures, add a `FunctionSource` to a
    runtime (`Runtime(..., sources=[...])`) or a `python` server to mcp.json.
    """

    def __init__(self, config: EngineConfig | None = None) -> None:
        """Args:
        config: Operator overrides for the classification (category, risk, enabled).
        """
        self._namespaces = CombinedSource()
        super().__init__(self._namespaces, config)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        """`(tool, arguments)` of every call that reached this source, in order."""

    def add(  # type: ignore[override]
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
        if server in self._namespaces.server_names:
            source = self._namespaces.leaf(server)
            assert isinstance(source, FunctionSource)
        else:
            source = FunctionSource(server, origin=f"stub tools '{server}'")
            self._namespaces.mount(source)

        def recorded(arguments: dict[str, Any]) -> Any:
            self.calls.append((name, dict(arguments)))
            return handler(arguments)

        spec = source.add(
            FunctionTool.from_handler(
                tool,
                recorded,
                input_schema=input_schema,
                risk=risk,
                category=category,
                takes_sql=takes_sql,
                timeout_s=timeout_s,
                annotations=annotations or {},
                trusted=trusted,
            )
        )
        super().add(source.specs)
        return spec


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
