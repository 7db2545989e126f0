"""Every layer stacked over a real MCP server in this process: names, denials, timeouts, SQL, records."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolagent.agents.models import Security
from toolagent.errors import ArgumentsInvalid, ExecutionDenied, SqlRejected, UnknownTool
from toolagent.model.status import CallStatus
from toolagent.testing import in_memory_pool, temp_store, test_runtime
from toolagent.tools.base import CallContext

pytestmark = pytest.mark.anyio


def _server(calls: list[str]):  # noqa: ANN202 - an MCPServer
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("crm", log_level="WARNING")

    @server.tool(name="find")
    def find(name: str) -> dict[str, str]:
        calls.append("find")
        return {"found": name}

    @server.tool(name="delete")
    def delete(name: str) -> str:
        calls.append("delete")
        return "deleted"

    @server.tool(name="slow")
    async def slow() -> str:
        calls.append("slow")
        await anyio.sleep(30)
        return "late"

    @server.tool(name="query")
    def query(sql: str) -> str:
        calls.append("query")
        return "rows"

    return server


async def test_every_layer_over_an_in_memory_server(tmp_path: Path) -> None:
    calls: list[str] = []
    pool = in_memory_pool(
        {"crm": _server(calls)},
        {
            "crm": {
                "risk": {"find": "safe", "delete": "dangerous", "slow": "safe", "query": "safe"},
                "sql_tools": ["query"],
            }
        },
    )
    async with temp_store(tmp_path) as store, test_runtime(store, pool, level="execute_basic") as (rt, me):
        assert await rt.catalogue.refresh() == {}
        listing = await rt.list_tools(me)
        ctx = CallContext(me)
        found = await rt.tools.call("crm/find", {"name": "ada"}, ctx)
        denied = await rt.tools.call("crm/delete", {"name": "ada"}, ctx)
        with pytest.raises(UnknownTool):
            await rt.tools.call("crm/nope", {}, ctx)
        bad = await rt.tools.call("crm/find", {"name": 3}, ctx)
        security = Security(denied_operations=["DELETE"], allowed_tables=["orders"])
        rejected = await rt.tools.call("crm/query", {"sql": "DELETE FROM orders"}, CallContext(me, security=security))
        with anyio.fail_after(10):
            timed_out = await rt.tools.call("crm/slow", {}, CallContext(me, timeout_ms=1000))
        page = await rt.history(me)
        verified = await rt.audit.verify()  # type: ignore[union-attr]

    # Names: the catalogue prefixes each tool with its server; risk comes from the server config.
    assert {e.name: e.risk for e in listing.tools} == {
        "crm/delete": "dangerous",
        "crm/find": "safe",
        "crm/query": "safe",
        "crm/slow": "safe",
    }
    assert found.status is CallStatus.OK and found.result is not None and found.result.structured == {"found": "ada"}
    assert denied.status is CallStatus.DENIED and isinstance(denied.exception, ExecutionDenied)
    assert bad.status is CallStatus.FAILED and isinstance(bad.exception, ArgumentsInvalid)
    assert rejected.status is CallStatus.FAILED and isinstance(rejected.exception, SqlRejected)
    assert timed_out.status is CallStatus.TIMED_OUT and timed_out.reason == "timeout after 1000 ms"
    # Only the allowed, valid calls reached the server.
    assert calls == ["find", "slow"]
    by_id = {e.id: e for e in page.executions}
    assert (by_id[denied.execution_id].denied, by_id[denied.execution_id].denial) == (True, "level")
    assert by_id[timed_out.execution_id].status == "cancelled"
    assert by_id[found.execution_id].status == "success"
    # Malformed calls (bad arguments, rejected SQL) are answered before the gate: never recorded.
    assert bad.execution_id is None and rejected.execution_id is None
    assert len(page.executions) == 3 and verified.ok
