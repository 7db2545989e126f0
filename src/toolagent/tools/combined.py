"""Leaf sources and `CombinedSource`, which mounts them under their namespaces.

A leaf offers the tools of one or more namespaces as `ToolSpec`s, unclassified, and calls them:
the MCP server pool (`mcp/pool.py`, one namespace per configured server) and `FunctionSource`
(`tools/function_source.py`, Python callables in this process). `CombinedSource` routes
`namespace/tool` to the leaf that mounts `namespace`, as httpx's `mounts` route URLs to
transports; the catalogue (`tools/catalogue.py`) classifies what it lists (category, risk) and is
the `ToolSource` the stack's layers wrap, whatever the leaves are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from .._aio import task_group
from ..errors import ConfigError, ServerUnavailable
from ..model.spec import ToolResult, ToolSpec, split_name


@runtime_checkable
class LeafSource(Protocol):
    """The tools of some namespaces, before classification, and how to call one.

    The owner enters a leaf (`async with`) before its tools are listed or called.
    """

    @property
    def server_names(self) -> list[str]:
        """The namespaces this leaf offers, known before it is entered."""
        ...

    def origin(self, namespace: str) -> str:
        """Where `namespace`'s tools come from, for messages ("MCP server 'x' (stdio)")."""
        ...

    async def list_servers(self, names: Iterable[str]) -> tuple[dict[str, list[ToolSpec]], dict[str, str]]:
        """The tools of each namespace of `names`, and those that could not be listed (name -> why)."""
        ...

    async def list_tools(self, namespace: str) -> list[ToolSpec]:
        """The tools of one namespace. Raises ServerUnavailable."""
        ...

    async def tool_spec(self, name: str) -> ToolSpec:
        """The tool `namespace/tool`. Raises ServerUnavailable or UnknownTool."""
        ...

    async def call(
        self, spec: ToolSpec, arguments: dict[str, Any], *, timeout_s: float | None = None, validate: bool = True
    ) -> ToolResult:
        """Call one tool; a tool reporting failure is a result, a broken call raises a `ToolCallError`."""
        ...

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc: Any) -> Any: ...


class CombinedSource:
    """Several leaves as one: each namespace is mounted by exactly one leaf.

    It is a leaf itself (the catalogue takes it where it takes one); it does not enter its leaves:
    their owner does, as it enters the server pool.
    """

    def __init__(self, leaves: Sequence[LeafSource] = ()) -> None:
        """Args:
        leaves: the leaves, in listing order.

        Raises:
            ConfigError: two leaves offer the same namespace (the message names both and the fix).
        """
        self._mounts: dict[str, LeafSource] = {}
        self.leaves: list[LeafSource] = []
        for leaf in leaves:
            self.mount(leaf)

    def mount(self, leaf: LeafSource) -> None:
        """Add a leaf's namespaces.

        Raises:
            ConfigError: one of them is already mounted (nothing of `leaf` is mounted then).
        """
        for namespace in leaf.server_names:
            other = self._mounts.get(namespace)
            if other is not None and other is not leaf:
                raise ConfigError(
                    f"two tool sources use the namespace '{namespace}': {other.origin(namespace)} and "
                    f"{leaf.origin(namespace)}; rename one of them (a namespace is a server's name in mcp.json)"
                )
        self._mounts.update((namespace, leaf) for namespace in leaf.server_names)
        if leaf not in self.leaves:
            self.leaves.append(leaf)

    @property
    def server_names(self) -> list[str]:
        """Every mounted namespace, leaf by leaf."""
        return list(self._mounts)

    def leaf(self, namespace: str) -> LeafSource:
        """The leaf mounting `namespace`.

        Raises:
            ServerUnavailable: none does (the message lists the namespaces).
        """
        leaf = self._mounts.get(namespace)
        if leaf is None:
            known = ", ".join(self._mounts) or "none configured"
            raise ServerUnavailable(namespace, f"no server of that name; configured: {known}")
        return leaf

    def origin(self, namespace: str) -> str:
        """Where `namespace`'s tools come from."""
        return self.leaf(namespace).origin(namespace)

    async def list_servers(self, names: Iterable[str]) -> tuple[dict[str, list[ToolSpec]], dict[str, str]]:
        """The tools of each namespace of `names`, every leaf listed concurrently; unknown names are
        reported with the others that could not be listed."""
        wanted = list(dict.fromkeys(names))
        by_leaf: dict[int, tuple[LeafSource, list[str]]] = {}
        errors: dict[str, str] = {}
        for name in wanted:
            leaf = self._mounts.get(name)
            if leaf is None:
                errors[name] = ServerUnavailable(
                    name, f"no server of that name; configured: {', '.join(self._mounts)}"
                ).message
            else:
                by_leaf.setdefault(id(leaf), (leaf, []))[1].append(name)
        found: dict[str, list[ToolSpec]] = {}

        async def one(leaf: LeafSource, names: list[str]) -> None:
            listed, failed = await leaf.list_servers(names)
            found.update(listed)
            errors.update(failed)

        async with task_group() as tg:
            for leaf, names in by_leaf.values():
                tg.start_soon(one, leaf, names)
        return {name: found[name] for name in wanted if name in found}, errors

    async def list_tools(self, namespace: str) -> list[ToolSpec]:
        """The tools of one namespace.

        Raises:
            ServerUnavailable: no leaf mounts it, or its server is down.
        """
        return await self.leaf(namespace).list_tools(namespace)

    async def tool_spec(self, name: str) -> ToolSpec:
        """The tool `namespace/tool`, from the leaf mounting the namespace.

        Raises:
            ServerUnavailable: no leaf mounts it, or its server is down.
            UnknownTool: the leaf has no such tool.
        """
        return await self.leaf(split_name(name)[0]).tool_spec(name)

    async def call(
        self, spec: ToolSpec, arguments: dict[str, Any], *, timeout_s: float | None = None, validate: bool = True
    ) -> ToolResult:
        """Call the tool on the leaf mounting its namespace."""
        return await self.leaf(spec.server).call(spec, arguments, timeout_s=timeout_s, validate=validate)

    async def __aenter__(self) -> CombinedSource:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        return None


__all__ = ["CombinedSource", "LeafSource"]
