"""A key scoped to some categories sees only those categories' tools and executions in the metrics
overview: REST and tRPC getToolMetrics without a tool, and `/metrics` when it needs a key. The API
runs in process over the probe MCP server (stdio), on SQLite and PostgreSQL. Each row of
`OVERVIEWS` is one read."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from _support.api_harness import PROBE_CATEGORY, probe_servers, provision

from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

pytestmark = pytest.mark.timeout(180)

MEMORY_TOOLS = {f"probe/{t}" for t, c in PROBE_CATEGORY.items() if c == "memory"}

#: (name, method, path, body) — each read by a key scoped to `agent:execute:memory`.
OVERVIEWS: list[tuple[str, str, str, Any]] = [
    ("REST overview", "GET", "/api/tools/metrics", None),
    ("tRPC overview", "GET", "/trpc/tools.getToolMetrics", None),
    ("tRPC overview with an empty input", "GET", "/trpc/tools.getToolMetrics?input=%7B%7D", None),
]


def _overview(body: dict[str, Any]) -> dict[str, Any]:
    return body.get("result", {}).get("data") or body


def test_a_scoped_key_sees_only_its_categories_in_the_metrics_overview(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLAGENT_METRICS_AUTH", "key")
    users = provision(
        db_url,
        [("ann", "admin", "enterprise"), ("memadmin", "admin", "enterprise")],
        scopes={"memadmin": ["agent:execute:memory"]},
    )
    app = create_app(db=db_url, servers=ServersConfig.from_data({"mcpServers": probe_servers()}))

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(
                    transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=60
                ) as ann,
                httpx.AsyncClient(
                    transport=transport, base_url="http://api", headers=users["memadmin"].auth, timeout=60
                ) as scoped,
            ):
                for name, arguments in (
                    ("probe/echo", {"text": "hi"}),
                    ("probe/pid", {}),
                    ("probe/fail", {"message": "no"}),
                ):
                    answer = await ann.post("/api/tools/execute", json={"name": name, "arguments": arguments})
                    assert answer.status_code in (200, 500), answer.text
                running = await ann.post(
                    "/api/tools/execute",
                    json={"name": "probe/sleep", "arguments": {"seconds": 60}, "timeout": 120_000, "async": True},
                )
                assert running.status_code == 202, running.text
                try:
                    full = (await ann.get("/api/tools/metrics")).json()
                    assert {"probe/pid", "probe/sleep"} <= set(full["toolUsageStats"]), full["toolUsageStats"]
                    assert full["activeExecutions"] == 1
                    for name, method, path, body in OVERVIEWS:
                        answer = await scoped.request(method, path, json=body)
                        assert answer.status_code == 200, (name, answer.text)
                        seen = _overview(answer.json())
                        assert set(seen["toolUsageStats"]) == MEMORY_TOOLS, (name, seen["toolUsageStats"])
                        assert {t["tool"] for t in seen["tools"]} == MEMORY_TOOLS, name
                        assert set(seen["categoryStats"]) <= {"memory"}, (name, seen["categoryStats"])
                        assert {d["tool"] for d in seen["denials"]} <= MEMORY_TOOLS, name
                        assert {m["tool"] for m in seen["mostUsedTools"]} <= MEMORY_TOOLS, name
                        assert seen["activeExecutions"] == 0, name  # the running sleep is not in its scope
                        assert seen["registryMetrics"]["totalTools"] == len(MEMORY_TOOLS), name
                        # Only the memory call of ann's four counts in her line.
                        assert {u["user"]: u["totalExecutions"] for u in seen["users"]}.get("ann") == 1, (name, seen)
                    prometheus = (await scoped.get("/metrics")).text
                    assert 'tool="probe/echo"' in prometheus
                    assert 'tool="probe/pid"' not in prometheus and 'tool="probe/sleep"' not in prometheus
                    assert 'tool="probe/pid"' in (await ann.get("/metrics")).text
                finally:
                    await ann.post(f"/api/tools/executions/{running.json()['executionId']}/cancel")

    anyio.run(main)
