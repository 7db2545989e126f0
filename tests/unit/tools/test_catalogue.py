"""The catalogue: one classified record per tool of the combined servers, refreshed in one place."""

from __future__ import annotations

import pytest

from toolagent.errors import ServerUnavailable, UnknownTool
from toolagent.testing import in_memory_pool
from toolagent.tools.catalogue import Catalogue

pytestmark = pytest.mark.anyio


def _server(name: str, tools: list[str]):  # noqa: ANN202 - an MCPServer
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name, log_level="WARNING")
    for tool in tools:
        server.tool(name=tool)(lambda: "ok")
    return server


async def test_two_servers_are_one_catalogue_with_category_and_risk_on_each_tool() -> None:
    pool = in_memory_pool(
        {"file": _server("file", ["read_file"]), "ops": _server("ops", ["restart"])},
        {"ops": {"risk": {"restart": "moderate"}, "category": "system"}},
    )
    async with pool:
        catalogue = Catalogue(pool)
        assert await catalogue.refresh() == {}
        entries = await catalogue.list_tools()
        resolved = await catalogue.resolve("ops/restart")
        with pytest.raises(UnknownTool, match="ops/restart"):
            await catalogue.resolve("ops/stop")
        with pytest.raises(ServerUnavailable):
            await catalogue.resolve("nope/x")
    assert {n: (e.category, e.risk, e.risk_source) for n, e in entries.items()} == {
        "file/read_file": ("file", "safe", "table"),
        "ops/restart": ("system", "moderate", "operator"),
    }
    assert resolved == entries["ops/restart"]
    assert catalogue.listing(category="system").total_count == 1
