"""The gateway's MCP server: `tools/list` and `tools/call` over the runtime's governed stack.

A client sees what its caller may run: the catalogue's tools that the one `Policy` allows for the
caller's level and API key (enabled, level against risk, key scopes, the operator's rules), under
their gateway names (`names.py`), each with its input and output schema and annotations derived
from toolagent's own risk rating, never from the upstream server's hints alone. A call goes
through `runtime.tools.call` like a REST or CLI call (gate, limits, records, audit, timeout,
cancellation), with `via="gateway"`; a tool the caller may not run is refused there and the refusal
recorded. A client's `notifications/cancelled` cancels the handler's task: the record layer stores
the call `cancelled` and the MCP client below sends the upstream server its own cancel.

Each execution's metadata and audit rows name the gateway, the client's reported name and version,
and the SHA-256 of the tool list that caller is shown, so an auditor can tell what the client could
see when it acted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types.jsonrpc import INVALID_PARAMS

from .. import __version__
from ..model.entry import ToolEntry
from ..model.status import CallStatus
from ..tools.base import CallContext, CallOutcome
from ..tools.records import GATEWAY_VIA
from .names import NameMap

if TYPE_CHECKING:
    from ..engine.principals import ApiKey, Principal
    from ..runtime import Runtime

#: How the gateway's calls are marked (`CallContext.via`, the execution metadata's key).
VIA = GATEWAY_VIA
#: The key of a call result's `_meta` naming its execution record (`toolagent executions show ID`).
EXECUTION_META = "toolagent/executionId"
#: The server name the gateway reports to its clients.
SERVER_NAME = "toolagent"
#: What the gateway tells a client about itself.
INSTRUCTIONS = (
    "toolagent's governed tools: each call is checked against your permission level, API key scopes, "
    "rate limits and budget, and recorded with an audit trail. A refused call returns an error naming the fix."
)


@dataclass(frozen=True)
class Caller:
    """Who a gateway request acts as."""

    principal: Principal
    """The user (level, plan, key categories)."""
    api_key: ApiKey | None = None
    """The key the request authenticated with (None over stdio: the local operator or `--user`)."""


#: Resolves the caller of one request (HTTP: its bearer key; stdio: the fixed user).
CallerOf = Callable[[ServerRequestContext[Any, Any]], Awaitable[Caller]]


def tool_annotations(entry: ToolEntry) -> types.ToolAnnotations:
    """Hints never more permissive than toolagent's risk rating: read-only only for `safe`,
    destructive for `dangerous` (and for `moderate` unless the server says otherwise), idempotent
    only for `safe`, open-world unless the server says closed."""
    hints = entry.spec.annotations
    risk = entry.risk
    if risk == "safe":
        read_only, destructive, idempotent = True, False, True
    elif risk == "moderate":
        read_only, destructive, idempotent = False, hints.get("destructive_hint") is not False, None
    else:
        read_only, destructive, idempotent = False, True, None
    open_world = hints.get("open_world_hint") is not False
    return types.ToolAnnotations(
        title=entry.spec.title,
        read_only_hint=read_only,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=open_world,
    )


def mcp_tool(entry: ToolEntry, name: str) -> types.Tool:
    """The MCP form of `entry` under its gateway name."""
    description = entry.spec.description or ""
    facts = f"[toolagent: {entry.name}, category {entry.category}, risk {entry.risk}]"
    return types.Tool(
        name=name,
        title=entry.spec.title,
        description=f"{description}\n\n{facts}" if description else facts,
        input_schema=entry.spec.input_schema,
        output_schema=entry.spec.output_schema,
        annotations=tool_annotations(entry),
    )


def list_digest(tools: Sequence[types.Tool]) -> str:
    """SHA-256 (hex) of a tool list as the client receives it (canonical JSON, in order)."""
    wire = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
    return hashlib.sha256(json.dumps(wire, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def spelled_digest(digest: str) -> str:
    """`sha256:` and the hex digest in groups of 16 joined by `.`: a 32+ character run of hex is
    masked as key material wherever metadata and audit reasons are stored (`model/redaction.py`),
    and this digest is no secret."""
    return "sha256:" + ".".join(digest[i : i + 16] for i in range(0, len(digest), 16))


def call_result(outcome: CallOutcome) -> types.CallToolResult:
    """How a call ended, as the client receives it: the tool's content and structured content, or
    an error result naming what happened (a refusal, a timeout, a cancellation, a failure); its
    `_meta` names the execution record (`EXECUTION_META`) when there is one."""
    result = outcome.result
    meta = {EXECUTION_META: outcome.execution_id} if outcome.execution_id else None
    if outcome.status is CallStatus.OK and result is not None:
        return types.CallToolResult.model_validate(
            {"content": result.content, "structuredContent": result.structured, "isError": False, "_meta": meta}
        )
    if outcome.status is CallStatus.FAILED and result is not None and result.content:
        return types.CallToolResult.model_validate({"content": result.content, "isError": True, "_meta": meta})
    if outcome.status is CallStatus.DENIED:
        text = f"denied: {outcome.reason or outcome.error}"
    elif outcome.status is CallStatus.TIMED_OUT:
        text = outcome.error or f"timed out: {outcome.reason}"
    elif outcome.status is CallStatus.CANCELLED:
        text = f"cancelled: {outcome.reason}"
    else:
        text = outcome.error or "the call failed"
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": text}], "isError": True, "_meta": meta}
    )


class Gateway:
    """One MCP server over one runtime; `server` is served by `http.py` and `stdio.py`."""

    def __init__(self, runtime: Runtime, caller_of: CallerOf, *, name: str = SERVER_NAME) -> None:
        """Args:
        runtime: The runtime whose policy lists and whose tool stack calls.
        caller_of: Resolves each request's caller.
        name: The server name reported to clients.
        """
        self.runtime = runtime
        self.caller_of = caller_of
        self.names = NameMap()
        self._shown: dict[tuple[str, ...], tuple[list[types.Tool], str]] = {}
        self.server: Server[Any] = Server(
            name,
            version=__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._on_list_tools,
            on_call_tool=self._on_call_tool,
        )

    async def refresh(self) -> NameMap:
        """List every configured server's tools and rebuild the name mapping.

        Raises:
            NameCollision: two tools would get one gateway name.
        """
        await self.runtime.catalogue.refresh()
        names = NameMap.build(e.name for e in self.runtime.catalogue.registry.entries())
        if names.to_gateway != self.names.to_gateway:
            self.names = names
        self._shown.clear()
        return self.names

    def visible(self, caller: Caller) -> list[ToolEntry]:
        """The tools `caller` may run, as the policy decides for a listing (deprecated ones left out)."""
        context = CallContext(caller.principal, api_key=caller.api_key, via=VIA)
        decide = self.runtime.policy.decide
        return [
            e
            for e in self.runtime.catalogue.registry.entries()
            if e.name in self.names.to_gateway
            and not e.deprecated
            and decide(caller.principal, e, context=context).allowed
        ]

    def shown(self, caller: Caller) -> tuple[list[types.Tool], str]:
        """The tool list `caller` is shown and its digest (`list_digest`)."""
        entries = self.visible(caller)
        key = tuple(e.name for e in entries)
        cached = self._shown.get(key)
        if cached is None:
            tools = [mcp_tool(e, self.names.to_gateway[e.name]) for e in entries]
            cached = self._shown[key] = (tools, list_digest(tools))
        return cached

    async def _on_list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        caller = await self.caller_of(ctx)
        await self.refresh()
        tools, _ = self.shown(caller)
        return types.ListToolsResult(tools=tools)

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        caller = await self.caller_of(ctx)
        qualified = self.names.qualified(params.name)
        if qualified is None:
            await self.refresh()
            qualified = self.names.qualified(params.name)
        entry = self.runtime.catalogue.get(qualified) if qualified is not None else None
        if entry is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool '{params.name}': tools/list shows the tools you may call")
        _, digest = self.shown(caller)
        context = CallContext(
            caller.principal,
            api_key=caller.api_key,
            via=VIA,
            session_id=_session_id(ctx),
            metadata={VIA: {"client": _client(ctx), "toolList": spelled_digest(digest)}},
        )
        outcome = await self.runtime.tools.call(entry, params.arguments or {}, context)
        return call_result(outcome)


def _client(ctx: ServerRequestContext[Any, Any]) -> str:
    """The client's reported `name version`, or `unknown`."""
    client_params = ctx.session.client_params
    info = client_params.client_info if client_params is not None else None
    if info is None:
        return "unknown"
    return f"{info.name} {info.version}".strip()


def _session_id(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The streamable HTTP session id of the request, when it has one."""
    request = ctx.request
    headers = getattr(request, "headers", None)
    value = headers.get("mcp-session-id") if headers is not None else None
    return str(value)[:100] if value else None


__all__ = [
    "EXECUTION_META",
    "INSTRUCTIONS",
    "SERVER_NAME",
    "VIA",
    "Caller",
    "CallerOf",
    "Gateway",
    "annotations",
    "call_result",
    "list_digest",
    "mcp_tool",
]
