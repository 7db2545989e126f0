"""The catalogue, innermost: the tools of a leaf source under `server/tool`, classified.

The leaf is the MCP server pool, a `FunctionSource`, or a `CombinedSource` mounting several
(`tools/combined.py`): classification is the same whatever lists the tools.
One record per tool: the leaf's `ToolSpec` (schema, server, annotations, timeout) with the
category, risk and discovery metadata `engine.registry` classifies it with (operator settings,
the built-in table, trusted annotations). Callers never keep a second list in sync: the
catalogue lists the servers into its registry and resolves names through the pool, whose
listing is cached per server and dropped on the server's list-changed notice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ..engine.config import EngineConfig
from ..engine.permissions import parse_category
from ..engine.registry import Registry, ToolListing
from ..errors import ServerUnavailable
from ..model.entry import ToolEntry
from ..model.spec import ToolSpec
from .base import CallContext, CallOutcome, ToolCall, ToolSource, result_outcome

if TYPE_CHECKING:
    from .combined import LeafSource


class Catalogue(ToolSource):
    """The tools of a leaf source (the MCP pool, functions, or both combined), classified; calls go
    to the leaf (arguments already checked)."""

    def __init__(
        self,
        pool: LeafSource | None = None,
        config: EngineConfig | None = None,
        *,
        on_registered: Callable[[ToolEntry], None] | None = None,
    ) -> None:
        """Args:
        pool: The leaf source: the MCP servers, functions, or both (entered by the caller); None:
            only tools added with `add`.
        config: Operator overrides of category, risk, tags, version, enabled.
        on_registered: Told each tool the first time it is listed.
        """
        self.pool = pool
        self.registry = Registry(config, on_registered=on_registered)
        self._listed: dict[str, list[ToolSpec]] = {}

    async def refresh(self, namespaces: Iterable[str] | None = None) -> dict[str, str]:
        """List the tools of `namespaces` (default: every configured server) into the catalogue.

        Servers are listed concurrently, and only those asked for are started. Unreachable or
        unknown servers are returned (name -> why), not raised: a call to one of their tools fails
        with its own message.
        """
        if self.pool is None:
            return {}
        listed, errors = await self.pool.list_servers(namespaces if namespaces is not None else self.pool.server_names)
        if namespaces is None:
            self._listed = listed
        else:
            self._listed.update(listed)
        self.registry.update(s for specs in self._listed.values() for s in specs)
        return errors

    async def refresh_one(self, namespace: str) -> list[ToolSpec]:
        """List one namespace's tools into the catalogue.

        Raises:
            ServerUnavailable: no such server, or it cannot be reached.
        """
        if self.pool is None:
            raise ServerUnavailable(namespace, "no tool servers are open in this runtime")
        specs = await self.pool.list_tools(namespace)
        self.add(specs)
        return specs

    def add(self, specs: Sequence[ToolSpec]) -> None:
        """Register specs listed elsewhere (they replace their servers' earlier listing)."""
        by_server: dict[str, list[ToolSpec]] = {}
        for spec in specs:
            by_server.setdefault(spec.server, []).append(spec)
        self._listed.update(by_server)
        self.registry.update(s for group in self._listed.values() for s in group)

    def __len__(self) -> int:
        return len(self.registry)

    @property
    def server_names(self) -> list[str]:
        """Every namespace the leaf offers (MCP servers and `python` servers alike)."""
        return self.pool.server_names if self.pool is not None else []

    def get(self, name: str) -> ToolEntry | None:
        """The listed tool named `name`, if any."""
        return self.registry.get(name)

    def require(self, name: str) -> ToolEntry:
        """The listed tool named `name`.

        Raises:
            NotFound: no such tool (the message says how to list them).
        """
        return self.registry.require(name)

    def listing(
        self,
        *,
        category: str | None = None,
        search: str | None = None,
        tags: Sequence[str] | None = None,
        include_deprecated: bool = False,
        include_disabled: bool = False,
        visible: Callable[[ToolEntry], bool] | None = None,
        runnable: Callable[[ToolEntry], bool] | None = None,
    ) -> ToolListing:
        """Discovery over the listed tools (`Registry.list`'s arguments).

        Raises:
            UsageError: unknown category.
        """
        if category is not None:
            parse_category(category)
        return self.registry.list(
            category=category,
            search=search,
            tags=tags,
            include_deprecated=include_deprecated,
            include_disabled=include_disabled,
            visible=visible,
            runnable=runnable,
        )

    async def list_tools(self, ctx: CallContext | None = None) -> dict[str, ToolEntry]:
        """Every listed tool by name."""
        return {e.name: e for e in self.registry.entries()}

    async def resolve(self, name: str) -> ToolEntry:
        """Route `server/tool` exactly as written, through the pool's current listing.

        Raises:
            ServerUnavailable: no such server, or it is down.
            UnknownTool: the server has no such tool (the message lists its tools).
        """
        if self.pool is None:
            return self.registry.require(name)
        return self.registry.entry_for(await self.pool.tool_spec(name))

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Send the call to its server; the deadline belongs to the timeout layer, not to the SDK."""
        if self.pool is None:
            raise ServerUnavailable(call.spec.server, "no tool servers are open in this runtime")
        result = await self.pool.call(call.spec, call.arguments, timeout_s=None, validate=False)
        return result_outcome(call, result)


__all__ = ["Catalogue"]
