"""Tools of the pool's MCP servers: listed (and cached until a server says its list changed),
turned into `ToolSpec`s, and called, with every SDK and transport failure translated into
toolagent's errors.

A streamable-HTTP server that restarted forgets its sessions: a call it refuses that way (404, or
400 "not initialized", before running anything) re-initializes and is sent once more. The
sessions themselves (opened lazily, shared, reopened after a break) are `mcp.sessions`'s business.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import anyio
import mcp_types
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.types import CallToolResult, PaginatedRequestParams, Tool

from .._aio import task_group
from ..errors import ServerUnavailable, ToolFailed, ToolTimedOut, UnknownTool, UpstreamError
from ..model.spec import ToolResult, ToolSpec, qualified, split_name
from .arguments import check_arguments
from .sessions import SessionPool, describe_error

log = logging.getLogger(__name__)

ProgressCallback = ProgressFnT


def _tool_result(result: CallToolResult) -> ToolResult:
    blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return ToolResult(is_error=bool(result.is_error), structured=result.structured_content, content=blocks, text=text)


def _annotations(tool: Tool) -> dict[str, Any]:
    if tool.annotations is None:
        return {}
    return tool.annotations.model_dump(exclude_none=True)


class ServerPool(SessionPool):
    """Lazily opened, shared sessions to every enabled server of a `ServersConfig`, and their tools.

    Use as an async context manager; `call`, `tool_spec` and `list_tools` may be used from any
    task inside it.
    """

    # -- tools ---------------------------------------------------------------------------------

    async def _listed(self, namespace: str) -> dict[str, Tool]:
        server = self._server(namespace)
        tools = server.tools
        if tools is not None:
            return tools
        for attempt in (1, 2):
            session = await self.session(namespace)
            mark = server.trace.seq if server.trace is not None else 0
            found: dict[str, Tool] = {}
            cursor: str | None = None
            try:
                while True:
                    page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
                    found.update((t.name, t) for t in page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                break
            except (MCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                await self._drop(server, session)
                failure = server.trace.since(mark, method="tools/list") if server.trace is not None else None
                if failure is not None and failure.session_refused and attempt == 1:
                    continue
                why = failure.describe() if failure is not None else describe_error(exc)
                raise ServerUnavailable(namespace, f"listing tools failed: {why}") from exc
        server.specs = {}
        server.tools = found
        return found

    def _spec(self, namespace: str, tool: Tool) -> ToolSpec:
        server = self._servers[namespace]
        cached = server.specs.get(tool.name)
        if cached is not None:
            return cached
        params = server.params
        spec = server.specs[tool.name] = ToolSpec(
            name=qualified(namespace, tool.name),
            server=namespace,
            tool=tool.name,
            description=tool.description or "",
            input_schema=dict(tool.input_schema or {"type": "object"}),
            output_schema=dict(tool.output_schema) if tool.output_schema else None,
            annotations=_annotations(tool),
            timeout_s=params.timeout_for(tool.name),
            takes_sql=tool.name in params.sql_tools,
            trusted=params.trusted,
            risk=params.risk_for(tool.name),
            category=params.category_for(tool.name),
            title=tool.title,
        )
        return spec

    async def list_tools(self, namespace: str, *, refresh: bool = False) -> list[ToolSpec]:
        """The tools of one server.

        Raises:
            ServerUnavailable: the server is unknown or cannot be reached.
        """
        if refresh:
            self._server(namespace).tools = None
        return [self._spec(namespace, t) for t in (await self._listed(namespace)).values()]

    async def list_servers(self, names: Iterable[str]) -> tuple[dict[str, list[ToolSpec]], dict[str, str]]:
        """The tools of each server of `names`, listed concurrently (only those are started).

        Returns:
            The listings by server, in the order asked, and the servers that could not be listed
            (name -> why): an unreachable server is reported, not fatal.
        """
        wanted = list(dict.fromkeys(names))
        found: dict[str, list[ToolSpec]] = {}
        errors: dict[str, str] = {}

        async def one(name: str) -> None:
            try:
                found[name] = await self.list_tools(name)
            except ServerUnavailable as exc:
                errors[name] = exc.message

        async with task_group() as tg:
            for name in wanted:
                tg.start_soon(one, name)
        return {name: found[name] for name in wanted if name in found}, errors

    async def all_tools(self) -> tuple[list[ToolSpec], dict[str, str]]:
        """Tools of every enabled server, listed concurrently; unreachable servers are reported, not fatal."""
        listed, errors = await self.list_servers(self._servers)
        return [s for specs in listed.values() for s in specs], errors

    async def tool_spec(self, name: str) -> ToolSpec:
        """Route `namespace/tool` exactly as written.

        Raises:
            ServerUnavailable: no such server, or it is down.
            UnknownTool: the server has no such tool (the message lists its tools).
        """
        namespace, tool = split_name(name)
        listed = await self._listed(namespace)
        found = listed.get(tool)
        if found is None:
            available = ", ".join(sorted(qualified(namespace, t) for t in listed)) or "none"
            raise UnknownTool(f"server '{namespace}' has no tool '{tool}'; its tools: {available}")
        return self._spec(namespace, found)

    # -- calls ---------------------------------------------------------------------------------

    async def call(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        *,
        timeout_s: float | None = None,
        progress: ProgressCallback | None = None,
        validate: bool = True,
    ) -> ToolResult:
        """Call a tool and translate every SDK and transport failure into toolagent's errors.

        A timeout makes the SDK send `notifications/cancelled` for the request, and so does
        cancelling the calling task.

        Raises:
            ArgumentsInvalid: `arguments` break the tool's input schema (nothing was sent).
            ToolTimedOut, UpstreamError, ServerUnavailable: the call could not complete.
        """
        if validate:
            check_arguments(spec, arguments)
        server = self._server(spec.server)
        for attempt in (1, 2):
            session = await self.session(spec.server)
            mark = server.trace.seq if server.trace is not None else 0
            try:
                result = await session.call_tool(
                    spec.tool, arguments, read_timeout_seconds=timeout_s, progress_callback=progress
                )
                break
            except MCPError as exc:
                # The HTTP answer comes first: servers reuse JSON-RPC codes at HTTP level (the
                # TypeScript SDK's 404 "Session not found" carries -32001, the timeout code).
                failure = server.trace.since(mark, method="tools/call", tool=spec.tool) if server.trace else None
                if failure is not None and failure.session_refused:
                    await self._drop(server, session)
                    if attempt == 1:
                        log.info("server %s refused its session (%s); re-initializing", spec.server, failure.describe())
                        continue
                if failure is not None:
                    raise UpstreamError(
                        f"MCP server '{spec.server}' refused '{spec.name}': {failure.describe()}"
                    ) from exc
                if exc.code == mcp_types.REQUEST_TIMEOUT:
                    raise ToolTimedOut(spec.name, timeout_s or 0) from exc
                if exc.code == mcp_types.CONNECTION_CLOSED:
                    await self._drop(server, session)
                    raise UpstreamError(
                        f"MCP server '{spec.server}' closed the connection during '{spec.name}'"
                    ) from exc
                raise UpstreamError(
                    f"MCP error from '{spec.server}' calling '{spec.tool}': {exc.message} (code {exc.code})"
                ) from exc
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
                await self._drop(server, session)
                raise UpstreamError(f"MCP server '{spec.server}' connection lost during '{spec.name}'") from exc
            except RuntimeError as exc:
                # The SDK checks structuredContent against the tool's outputSchema and raises RuntimeError.
                raise ToolFailed(spec.name, f"result rejected: {exc}") from exc
        if not isinstance(result, CallToolResult):
            raise UpstreamError(f"unexpected result type {type(result).__name__} from '{spec.name}'")
        return _tool_result(result)


__all__ = ["ProgressCallback", "ServerPool"]
