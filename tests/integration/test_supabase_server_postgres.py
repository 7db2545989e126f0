"""The Supabase MCP server against PostgreSQL: demo data, the four tools, and read-only safety.

Skipped without TOOLAGENT_TEST_PG_URL (scripts/test starts a throwaway cluster).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolagent.errors import ConfigError, StoreError
from toolagent.servers.supabase import load_demo_data
from toolagent.servers.supabase.catalog import Catalog
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo
from toolagent.servers.supabase.generator import generate_sql
from toolagent.servers.supabase.postgres_backend import PostgresBackend
from toolagent.servers.supabase.sqlite_backend import SqliteBackend

pytestmark = pytest.mark.postgres

COUNTS = {"users": 240, "agent_conversations": 2400, "kpi_metrics": 10, "kpi_data": 1380}
QUESTIONS = [
    "how many users",
    "top 10 conversations by date",
    "conversations by status",
    "users per organization",
    "failed conversations",
    "users on the team plan",
    "conversations in the last 30 days",
    "users created in 2026",
    "conversations this year",
    "average message count",
    "total message_count per agent",
    "average kpi value per metric",
    "conversations with user email",
    "kpi values with metric name",
    "conversations per month in 2026",
    "conversations with title containing 'refund'",
    "completed or failed conversations last month",
    "average nps per organization in 2026",
    "top 5 users by message count",
    "count of conversations by day in the last 7 days",
    "users with more than 10 conversations",
]


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def demo_pg(pg_base_url: str) -> Iterator[str]:
    """A database with the demo data, loaded through the load-demo command, for the module."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    base = _plain(pg_base_url)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{base.rpartition('/')[0]}/{name}"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "toolagent.servers.supabase", "load-demo", "--db-url", url],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "agent_conversations: 2400 rows" in proc.stdout
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
async def session(demo_pg: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolagent.servers.supabase"],
        env={"SUPABASE_BACKEND": "postgres", "SUPABASE_DB_URL": demo_pg, "SUPABASE_STATEMENT_TIMEOUT_MS": "10000"},
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


def _counts(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in COUNTS}  # type: ignore[index]


@pytest.mark.anyio
async def test_the_four_tools_on_postgres(session: ClientSession) -> None:
    schema = await call(session, "get-schema", {})
    assert schema["backend"] == "postgres"
    tables = {t["name"]: t for t in schema["tables"]}
    assert {name: t["row_count"] for name, t in tables.items()} == COUNTS
    types = {c["name"]: c["type"] for c in tables["agent_conversations"]["columns"]}
    assert (types["started_at"], types["message_count"]) == ("timestamptz", "integer")
    assert tables["kpi_data"]["foreign_keys"] == [
        {"column": "metric_id", "references_table": "kpi_metrics", "references_column": "id"}
    ]
    generated = await call(
        session,
        "generate-sql",
        {"query": "top 10 conversations by date", "tables": ["agent_conversations"], "max_rows": 10},
    )
    result = await call(session, "execute-sql", {"sql": generated["sql"], "max_rows": 100})
    assert result["row_count"] == 10
    started = [r["started_at"] for r in result["rows"]]
    assert started == sorted(started, reverse=True) and started[0].endswith("+00:00")
    analysis = await call(session, "analyze-results", {"rows": result["rows"], "analysis_prompt": "for stakeholders"})
    assert "for stakeholders" in analysis["summary"]
    averages = await call(session, "execute-sql", {"sql": "SELECT avg(value) AS v FROM kpi_data WHERE metric_id = 1"})
    assert isinstance(averages["rows"][0]["v"], float)  # numeric -> float


@pytest.mark.anyio
async def test_delete_is_rejected_and_nothing_changes(session: ClientSession, demo_pg: str) -> None:
    with anyio.fail_after(60):
        result = await session.call_tool("execute-sql", {"sql": "DELETE FROM users"})
    assert result.is_error and "statement type DELETE is denied" in result.content[0].text  # type: ignore[union-attr]
    assert _counts(demo_pg) == COUNTS


def test_read_only_transaction_refuses_writes_the_guard_would_never_see(demo_pg: str) -> None:
    backend = PostgresBackend(demo_pg, 10_000)
    insert = (
        "INSERT INTO users (id, email, full_name, organization_slug, role, plan, created_at) "
        "VALUES (9999, 'x@y.z', 'X', 'demo', 'member', 'free', now())"
    )
    with pytest.raises(StoreError, match="cannot execute INSERT in a read-only transaction"):
        backend.execute(insert, 10)
    with pytest.raises(StoreError, match="read-only transaction"):
        backend.execute("WITH gone AS (DELETE FROM users RETURNING id) SELECT count(*) FROM gone", 10)
    assert _counts(demo_pg) == COUNTS


def test_statement_timeout(demo_pg: str) -> None:
    with pytest.raises(StoreError, match="statement timed out after 200 ms"):
        PostgresBackend(demo_pg, 200).execute("SELECT pg_sleep(5)", 10)


def test_max_rows_stops_fetching(demo_pg: str) -> None:
    result = PostgresBackend(demo_pg, 10_000).execute("SELECT id FROM agent_conversations ORDER BY id", 3)
    assert [r["id"] for r in result.rows] == [1, 2, 3] and result.truncated
    # 5.76 million rows stream from the join; fetching stops (and the query is cancelled)
    # after the third, well inside the statement timeout.
    huge = PostgresBackend(demo_pg, 10_000).execute(
        "SELECT a.id, b.id FROM agent_conversations a CROSS JOIN agent_conversations b", 2
    )
    assert huge.row_count == 2 and huge.truncated


def test_generated_sql_gives_the_same_rows_on_postgres_and_embedded(demo_pg: str, tmp_path: Path) -> None:
    pg = PostgresBackend(demo_pg, 10_000)
    embedded = SqliteBackend(ensure_sqlite_demo(tmp_path / "demo.sqlite"), 10_000)
    pg_tables, sqlite_tables = pg.tables(), embedded.tables()
    assert [t.model_dump() for t in pg_tables] == [t.model_dump() for t in sqlite_tables]
    pg_catalog = Catalog.from_schema(pg_tables, pg.category_values(pg_tables))
    assert pg_catalog.values == embedded.category_values(sqlite_tables)
    for question in QUESTIONS:
        sql = generate_sql(question, pg_catalog, 1000).sql
        assert pg.execute(sql, 1000).rows == embedded.execute(sql, 1000).rows, question


def test_load_demo_data_refuses_to_overwrite(pg_url: str) -> None:
    assert load_demo_data(pg_url) == COUNTS
    with pytest.raises(ConfigError, match="demo tables already exist"):
        load_demo_data(pg_url)
    assert load_demo_data(pg_url, replace=True) == COUNTS
