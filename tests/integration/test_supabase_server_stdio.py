"""The Supabase MCP server as a real stdio subprocess (`python -m toolagent.servers.supabase`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.anyio

ALLOWED = "agent_conversations,kpi_data,kpi_metrics,users"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ClientSession]:
    """One server process for the module (start-up takes about two seconds)."""
    db = tmp_path_factory.mktemp("supabase-stdio") / "demo.sqlite"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolagent.servers.supabase"],
        env={"SUPABASE_DEMO_DB": str(db), "SUPABASE_ALLOWED_TABLES": ALLOWED},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, read_timeout_seconds=60) as s:
        with anyio.fail_after(60):
            await s.initialize()
        yield s


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    with anyio.fail_after(60):
        result = await session.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_lists_four_read_only_tools(session: ClientSession) -> None:
    tools = (await session.list_tools()).tools
    assert sorted(t.name for t in tools) == ["analyze-results", "execute-sql", "generate-sql", "get-schema"]
    assert all(t.annotations and t.annotations.read_only_hint and not t.annotations.destructive_hint for t in tools)
    assert all(t.output_schema for t in tools)


async def test_the_four_tools_in_sequence(session: ClientSession) -> None:
    schema = await call(session, "get-schema", {})
    assert [t["name"] for t in schema["tables"]] == ALLOWED.split(",")
    generated = await call(
        session,
        "generate-sql",
        {"query": "top 10 conversations by date", "tables": ["agent_conversations"], "max_rows": 10},
    )
    result = await call(session, "execute-sql", {"sql": generated["sql"], "max_rows": 100})
    assert result["row_count"] == 10 and result["truncated"] is False
    started = [r["started_at"] for r in result["rows"]]
    assert started == sorted(started, reverse=True)
    analysis = await call(
        session,
        "analyze-results",
        {
            "columns": result["columns"],
            "rows": result["rows"],
            "analysis_prompt": "Summarize main findings for stakeholders",
        },
    )
    assert "for stakeholders" in analysis["summary"] and "**10 rows**" in analysis["summary"]
    assert {c["name"] for c in analysis["stats"]["columns"]} == set(result["columns"])


async def test_destructive_sql_is_rejected(session: ClientSession) -> None:
    with anyio.fail_after(60):
        result = await session.call_tool("execute-sql", {"sql": "DELETE FROM users"})
    assert result.is_error
    assert "statement type DELETE is denied" in result.content[0].text  # type: ignore[union-attr]
    counts = await call(session, "execute-sql", {"sql": "SELECT count(*) AS n FROM users"})
    assert counts["rows"] == [{"n": 240}]


def test_missing_database_url_fails_at_start_up(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "toolagent.servers.supabase"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SUPABASE_BACKEND": "postgres"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == "Required environment variable SUPABASE_DB_URL is not set"
    assert proc.stdout == ""
