"""Direct calls made under an agent: `agent` on POST /api/tools/execute and tRPC executeTool,
`--agent` on `toolagent tools call`. The agent's tool list and `security` block apply as in a BUILD
step; the execution and its audit rows name the agent. The real Supabase MCP server runs over
stdio; the API runs in process, on SQLite and PostgreSQL. Each row of `UNDER_AGENT` is one call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _support.api_harness import agent_body, provision
from typer.testing import CliRunner

from toolagent.api.app import create_app

from .test_result_bounds import demo_db, supabase_config, supabase_servers  # noqa: F401 - the module fixture

pytestmark = pytest.mark.timeout(240)

#: An agent allowed one SQL tool on one table, with the default denylist.
NARROW = {
    "metadata": {"name": "narrow", "version": "1.0.0", "type": "tool"},
    "configuration": {"tools": ["supabase/execute-sql"], "security": {"allowed_tables": ["users"]}},
}

#: (name, transport, tool, arguments, agent, HTTP status, text in the answer, recorded)
UNDER_AGENT: list[tuple[str, str, str, dict[str, Any], str | None, int, str, bool]] = [
    (
        "a table outside the agent's allowlist",
        "rest",
        "supabase/execute-sql",
        {"sql": "select title from agent_conversations limit 3"},
        "demo/narrow",
        403,
        "not in allowed tables",
        False,
    ),
    (
        "the same over tRPC",
        "trpc",
        "supabase/execute-sql",
        {"sql": "select title from agent_conversations limit 3"},
        "demo/narrow",
        403,
        "not in allowed tables",
        False,
    ),
    (
        "a denied operation",
        "rest",
        "supabase/execute-sql",
        {"sql": "delete from users"},
        "demo/narrow",
        403,
        "DELETE",
        False,
    ),
    (
        "a catalog read hidden in a subquery",
        "rest",
        "supabase/execute-sql",
        {"sql": "select email from users where email in (select usename from pg_shadow) limit 1"},
        "demo/narrow",
        403,
        "pg_shadow",
        False,
    ),
    (
        "a tool outside the agent's tool list",
        "rest",
        "supabase/get-schema",
        {},
        "demo/narrow",
        403,
        "not in the agent's tool list",
        True,
    ),
    (
        "an allowed statement",
        "rest",
        "supabase/execute-sql",
        {"sql": "select email from users limit 3"},
        "demo/narrow",
        200,
        "email",
        True,
    ),
    (
        "an allowed statement over tRPC",
        "trpc",
        "supabase/execute-sql",
        {"sql": "select email from users limit 3"},
        "demo/narrow",
        200,
        "email",
        True,
    ),
    (
        "the same table without an agent (the server's allowlist only)",
        "rest",
        "supabase/execute-sql",
        {"sql": "select title from agent_conversations limit 3"},
        None,
        200,
        "title",
        True,
    ),
    (
        "an unknown agent",
        "rest",
        "supabase/execute-sql",
        {"sql": "select 1"},
        "demo/nobody",
        404,
        "agent 'demo/nobody' not found",
        False,
    ),
    (
        "an unknown agent over tRPC",
        "trpc",
        "supabase/execute-sql",
        {"sql": "select 1"},
        "demo/nobody",
        404,
        "agent 'demo/nobody' not found",
        False,
    ),
    (
        "an agent that is not org/slug",
        "rest",
        "supabase/execute-sql",
        {"sql": "select 1"},
        "narrow",
        400,
        "agent",
        False,
    ),
]


async def _call(client: httpx.AsyncClient, transport: str, body: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    if transport == "rest":
        answer = await client.post("/api/tools/execute", json=body)
        return answer.status_code, answer.text, answer.json()
    answer = await client.post("/trpc/tools.executeTool", json=body)
    data = answer.json()
    return answer.status_code, answer.text, data.get("result", {}).get("data") or data


def test_direct_calls_under_an_agent(db_url: str, demo_db: Path) -> None:  # noqa: F811 - the fixture
    users = provision(db_url, [("ann", "admin", "enterprise"), ("bob", "execute_basic", "enterprise")])
    app = create_app(db=db_url, servers=supabase_servers(demo_db))

    async def main() -> None:
        async with app.router.lifespan_context(app):
            runtime = app.state.services.runtime
            transport = httpx.ASGITransport(app=app)
            async with (
                httpx.AsyncClient(
                    transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=120
                ) as ann,
                httpx.AsyncClient(
                    transport=transport, base_url="http://api", headers=users["bob"].auth, timeout=120
                ) as bob,
            ):
                assert (await ann.put("/api/agents/demo/narrow", json=agent_body(NARROW))).status_code == 200
                for name, kind, tool, arguments, agent, status, needle, recorded in UNDER_AGENT:
                    body: dict[str, Any] = {"name": tool, "arguments": arguments, "timeout": 60_000}
                    if agent is not None:
                        body["agent"] = agent
                    got, text, data = await _call(bob, kind, body)
                    assert got == status, (name, got, text[:400])
                    assert needle in text, (name, text[:400])
                    details = data.get("error", {}).get("details")
                    execution_id = data.get("executionId") or (
                        details.get("executionId") if isinstance(details, dict) else None
                    )
                    assert bool(execution_id) == recorded, (name, text[:400])
                    if execution_id and agent is not None:
                        shown = (await bob.get(f"/api/tools/executions/{execution_id}")).json()["execution"]
                        assert shown["metadata"]["agent"] == agent, (name, shown)
                        rows = await runtime.audit.query(execution_id=execution_id)
                        assert rows and all(f"under agent {agent}" in (r.reason or "") for r in rows), (name, rows)
                # The caller may not name an agent through its metadata.
                spoof = await bob.post(
                    "/api/tools/execute",
                    json={
                        "name": "supabase/execute-sql",
                        "arguments": {"sql": "select 1"},
                        "context": {"metadata": {"agent": "demo/narrow"}},
                    },
                )
                assert spoof.status_code == 400 and "context.metadata" in spoof.text, spoof.text

    anyio.run(main)


def test_sql_tools_may_be_required_to_run_under_an_agent(
    tmp_path: Path,
    demo_db: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLAGENT_SQL_TOOLS_REQUIRE_AGENT", "true")
    db = f"sqlite+aiosqlite:///{tmp_path / 'api.db'}"
    users = provision(db, [("ann", "admin", "enterprise")])
    app = create_app(db=db, servers=supabase_servers(demo_db))

    async def main() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://api", headers=users["ann"].auth, timeout=120
            ) as ann:
                assert (await ann.put("/api/agents/demo/narrow", json=agent_body(NARROW))).status_code == 200
                sql = {"name": "supabase/execute-sql", "arguments": {"sql": "select email from users limit 2"}}
                bare = await ann.post("/api/tools/execute", json=sql)
                assert bare.status_code == 403 and "TOOLAGENT_SQL_TOOLS_REQUIRE_AGENT" in bare.text, bare.text
                under = await ann.post("/api/tools/execute", json={**sql, "agent": "demo/narrow"})
                assert under.status_code == 200, under.text
                # Tools that take no SQL are not affected.
                assert (await ann.post("/api/tools/execute", json={"name": "supabase/get-schema"})).status_code == 200
                # BUILD steps run under their agent.
                built = await ann.post(
                    "/api/agents/demo/narrow/build",
                    json={
                        "payload": {},
                        "toolParams": {"supabase/execute-sql": {"sql": "select email from users limit 2"}},
                    },
                )
                assert built.status_code == 200 and built.json()["success"], built.text[:400]

    anyio.run(main)


def test_cli_tools_call_under_an_agent(tmp_path: Path, demo_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from toolagent.cli import app as cli

    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": supabase_config(demo_db)}))
    agent = tmp_path / "narrow.json"
    agent.write_text(json.dumps(NARROW))
    monkeypatch.setenv("TOOLAGENT_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("TOOLAGENT_MCP_CONFIG", str(servers))
    runner = CliRunner()
    assert runner.invoke(cli, ["agents", "upsert", str(agent), "--org", "demo"]).exit_code == 0

    def call(*args: str) -> Any:
        return runner.invoke(cli, ["tools", "call", "supabase/execute-sql", *args])

    unknown = call("--args", '{"sql": "select 1"}', "--agent", "demo/nobody")
    assert unknown.exit_code == 2 and "agent 'demo/nobody' not found" in unknown.output, unknown.output
    rejected = call("--args", '{"sql": "select title from agent_conversations limit 2"}', "--agent", "demo/narrow")
    assert rejected.exit_code == 1 and "not in allowed tables" in rejected.output, rejected.output
    allowed = call(
        "--args",
        '{"sql": "select email from users limit 2"}',
        "--agent",
        "demo/narrow",
    )
    assert allowed.exit_code == 0, allowed.output
    bare = call("--args", '{"sql": "select title from agent_conversations limit 2"}')
    assert bare.exit_code == 0, bare.output
