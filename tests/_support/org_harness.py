"""Helpers for tests of agent ownership: a store with users, keys and roles, and the API in process."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import httpx

from toolagent.api.app import create_app
from toolagent.engine.audit import AuditLog
from toolagent.engine.audit_chain import AuditRecord
from toolagent.engine.principals import Principals
from toolagent.mcp.config import ServersConfig
from toolagent.store import open_store

#: The name test set-ups act under (as the CLI's local operator: not gated, audited).
OPERATOR_NAME = "ops"


def definition(
    name: str,
    tools: Sequence[str] = ("probe/echo",),
    *,
    security: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """An agent definition; `security` becomes its `configuration.security` block when given."""
    configuration: dict[str, Any] = {"tools": list(tools), "toolParams": params or {}}
    if security is not None:
        configuration["security"] = security
    return {"metadata": {"name": name, "version": "1.0.0", "type": "tool"}, "configuration": configuration}


def body(defn: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A PUT /api/agents body holding `defn` as JSON text."""
    return {
        "display_name": defn["metadata"]["name"],
        "agent_type": "tool",
        "mode_profile": "tool_full",
        "status": "active",
        "yaml": json.dumps(defn),
        **fields,
    }


async def provision(
    url: str,
    users: Sequence[tuple[str, str]],
    *,
    scopes: dict[str, list[str]] | None = None,
) -> dict[str, str]:
    """Add `(name, level)` users with one API key each; returns name -> key."""
    keys: dict[str, str] = {}
    async with open_store(url) as store:
        principals = Principals(store.db)
        for name, level in users:
            await principals.add_user(name, level=level, plan="enterprise")
            _, keys[name] = await principals.create_key(name, scopes=(scopes or {}).get(name, ()))
    return keys


async def grant(url: str, org: str, user: str, role: str) -> None:
    """Give `user` `role` in `org`, as the operator."""
    from toolagent.engine.orgs import Organizations
    from toolagent.engine.ownership import Actor

    async with open_store(url) as store:
        await Organizations(store.db).grant(Actor.local_operator(OPERATOR_NAME), org, user, role)


def grant_sync(url: str, org: str, user: str, role: str) -> None:
    """`grant` for synchronous tests (live servers)."""
    anyio.run(grant, url, org, user, role)


async def audit_rows(url: str, *, event_prefix: str = "") -> list[AuditRecord]:
    """Every audit row whose event starts with `event_prefix`, oldest first."""
    async with open_store(url) as store:
        rows = await AuditLog(store.db).query(limit=10_000)
    return [r for r in rows if r.event.startswith(event_prefix)]


async def audit_verifies(url: str) -> bool:
    """The audit chain of the store verifies."""
    async with open_store(url) as store:
        return (await AuditLog(store.db).verify()).ok


@contextlib.asynccontextmanager
async def api_clients(url: str, keys: dict[str, str]) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """The API in process over `url` (no MCP servers), with one client per user."""
    app = create_app(db=url, servers=ServersConfig.from_data({"mcpServers": {}}))
    async with app.router.lifespan_context(app), contextlib.AsyncExitStack() as stack:
        transport = httpx.ASGITransport(app=app)
        clients = {}
        for name, key in keys.items():
            clients[name] = await stack.enter_async_context(
                httpx.AsyncClient(
                    transport=transport, base_url="http://api", headers={"Authorization": f"Bearer {key}"}, timeout=30
                )
            )
        yield clients
