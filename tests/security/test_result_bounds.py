"""Results are bounded in bytes outside the server too: what an execution, a step record and a
deliverable store, and what the API answers, stays under toolagent's own caps, whatever the MCP
server returned. The real Supabase MCP server runs over stdio with a cap far above toolagent's;
the API runs in process, on SQLite and on PostgreSQL. Each row of `HUGE_RESULTS` is one attack."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _support.api_harness import agent_body, provision

from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig
from toolagent.model.bounds import json_size
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo

pytestmark = pytest.mark.timeout(240)

#: toolagent's caps in these tests; the server's own cap (SUPABASE_MAX_RESULT_BYTES) is 5 MB.
RESULT_CAP = 16 * 1024
DELIVERABLE_CAP = 48 * 1024
DEMO_TABLES = "users,agent_conversations,kpi_metrics,kpi_data"

#: (name, execute-sql arguments): each answer of the server is far over RESULT_CAP.
HUGE_RESULTS: list[tuple[str, dict[str, Any]]] = [
    ("every conversation", {"sql": "select * from agent_conversations", "max_rows": 10_000}),
    ("a cross join", {"sql": "select u.email, c.title from users u, agent_conversations c", "max_rows": 10_000}),
    (
        "an endless recursive CTE",
        {"sql": "with recursive r(n) as (select 1 union all select n + 1 from r) select n from r", "max_rows": 10_000},
    ),
]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sqlite_demo(tmp_path_factory.mktemp("bounds-demo") / "demo.sqlite")


def supabase_config(demo_db: Path) -> dict[str, Any]:
    """The `mcpServers` entry of the Supabase MCP server over stdio, on the embedded demo database."""
    env = {
        "SUPABASE_DEMO_DB": str(demo_db),
        "SUPABASE_ALLOWED_TABLES": DEMO_TABLES,
        "SUPABASE_MAX_RESULT_BYTES": "5000000",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    return {
        "supabase": {
            "command": sys.executable,
            "args": ["-m", "toolagent.servers.supabase"],
            "env": env,
            "timeout_s": 60,
            "risk": "safe",
            "category": "database",
            "trusted": True,
            "sql_tools": ["execute-sql"],
        }
    }


def supabase_servers(demo_db: Path) -> ServersConfig:
    """The Supabase MCP server over stdio, on the embedded demo database."""
    return ServersConfig.from_data({"mcpServers": supabase_config(demo_db)})


def _assert_bounded(result: dict[str, Any], cap: int = RESULT_CAP) -> None:
    assert result["truncated"]["maxBytes"] == cap and result["truncated"]["sizeBytes"] > cap, result.get("truncated")
    assert json_size(result) <= cap
    rows = result["structuredContent"]["rows"]
    assert rows, "the leading rows are kept"
    assert result["structuredContent"]["row_count"] > len(rows)


#: A BUILD of one huge step, rendered as markdown (tables, text).
HUGE_AGENT = {
    "metadata": {"name": "huge", "version": "1.0.0", "type": "tool"},
    "configuration": {
        "tools": ["supabase/execute-sql"],
        "deliverable": {"format": "markdown"},
        "toolParams": {"supabase/execute-sql": HUGE_RESULTS[0][1]},
    },
}


@pytest.mark.parametrize(("name", "arguments"), HUGE_RESULTS, ids=[r[0] for r in HUGE_RESULTS])
def test_a_huge_result_is_stored_and_answered_bounded(
    db_url: str, demo_db: Path, monkeypatch: pytest.MonkeyPatch, name: str, arguments: dict[str, Any]
) -> None:
    monkeypatch.setenv("TOOLAGENT_MAX_RESULT_BYTES", str(RESULT_CAP))
    monkeypatch.setenv("TOOLAGENT_MAX_DELIVERABLE_BYTES", str(DELIVERABLE_CAP))
    users = provision(db_url, [("ann", "admin", "enterprise")])
    app = create_app(db=db_url, servers=supabase_servers(demo_db))

    async def main() -> None:
        async with app.router.lifespan_context(app):
            store = app.state.services.store
            runtime = app.state.services.runtime
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=120
            ) as client:
                answer = await client.post(
                    "/api/tools/execute",
                    json={"name": "supabase/execute-sql", "arguments": arguments, "timeout": 120_000},
                )
                assert answer.status_code == 200, answer.text[:500]
                assert len(answer.content) < RESULT_CAP + 2048
                _assert_bounded(answer.json()["result"])
                execution_id = answer.json()["executionId"]

                shown = await client.get(f"/api/tools/executions/{execution_id}")
                assert shown.status_code == 200 and len(shown.content) < RESULT_CAP + 4096
                _assert_bounded(shown.json()["execution"]["result"])
                stored = await runtime.executions.get(execution_id)
                assert stored is not None and stored.result is not None
                _assert_bounded(stored.result.to_json())

                trpc = await client.post(
                    "/trpc/tools.executeTool",
                    json={"name": "supabase/execute-sql", "arguments": arguments, "timeout": 120_000},
                )
                assert trpc.status_code == 200 and len(trpc.content) < RESULT_CAP + 2048
                _assert_bounded(trpc.json()["result"]["data"]["result"])

                assert (await client.put("/api/agents/demo/huge", json=agent_body(HUGE_AGENT))).status_code == 200
                built = await client.post("/api/agents/demo/huge/build", json={"payload": {}})
                assert built.status_code == 200, built.text[:500]
                run_id = built.json()["run"]["id"]
                deliverable = (await client.get(f"/api/deliverables/{run_id}")).json()["deliverable"]
                size = (
                    len(deliverable["content"].encode())
                    + json_size(deliverable["data"])
                    + json_size(deliverable["metadata"])
                )
                assert size <= DELIVERABLE_CAP
                assert deliverable["metadata"]["truncated"]["maxBytes"] == DELIVERABLE_CAP
                assert "Truncated: the full deliverable is" in deliverable["content"]
                steps = await store.runs.get_steps(run_id)
                _assert_bounded(steps[0].result)
                shown_run = await client.get(f"/api/runs/{run_id}")
                assert shown_run.status_code == 200 and len(shown_run.content) < RESULT_CAP + 4096
                _assert_bounded(shown_run.json()["run"]["steps"][0]["result"])
                assert (await client.get("/health")).status_code == 200

    anyio.run(main)


def test_a_history_page_of_huge_results_is_bounded_as_a_whole(
    tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each stored result is under the result cap, but a page holds up to 100 of them: the page's
    results together are bounded like a deliverable (each keeps a fair share)."""
    monkeypatch.setenv("TOOLAGENT_MAX_RESULT_BYTES", str(RESULT_CAP))
    monkeypatch.setenv("TOOLAGENT_MAX_DELIVERABLE_BYTES", str(DELIVERABLE_CAP))
    db_url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    users = provision(db_url, [("ann", "admin", "enterprise")])
    app = create_app(db=db_url, servers=supabase_servers(demo_db))
    calls = 6  # 6 results of RESULT_CAP are twice DELIVERABLE_CAP

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=120
            ) as client:
                for _ in range(calls):
                    answer = await client.post(
                        "/api/tools/execute", json={"name": "supabase/execute-sql", "arguments": HUGE_RESULTS[0][1]}
                    )
                    assert answer.status_code == 200, answer.text[:500]
                for page in (
                    await client.get("/api/tools/history", params={"limit": 100}),
                    await client.get("/trpc/tools.getToolHistory", params={"input": '{"limit": 100}'}),
                ):
                    assert page.status_code == 200, page.text[:500]
                    body = page.json()
                    executions = body["executions"] if "executions" in body else body["result"]["data"]["executions"]
                    assert len(executions) == calls
                    assert len(page.content) < DELIVERABLE_CAP + 8192
                    assert sum(json_size(e["result"]) for e in executions) <= DELIVERABLE_CAP
                    assert all(
                        e["result"]["truncated"] and e["result"]["structuredContent"]["rows"] for e in executions
                    )

    anyio.run(main)
