"""The Supabase server on its own: default allowlist, catalogs refused, results bounded in bytes.

Each case runs on the embedded SQLite backend, and on PostgreSQL when TOOLAGENT_TEST_PG_URL
is set. Calls go through `SupabaseService`, the logic behind the MCP tools, as direct calls do
(no agent, no agent security block).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from toolagent.servers.supabase import SupabaseSettings
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo, load_demo_data
from toolagent.servers.supabase.server import SupabaseService

from .sql_attacks import CATALOG_READS, RESOURCE_STATEMENTS

pytestmark = pytest.mark.timeout(120)

CAP = 100_000
TIMEOUT_MS = 2_000


@pytest.fixture(scope="module")
def demo_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sqlite_demo(tmp_path_factory.mktemp("demo") / "demo.sqlite")


@pytest.fixture(scope="module")
def demo_postgres(pg_base_url: str) -> Iterator[str]:
    import psycopg

    plain = pg_base_url.replace("postgresql+psycopg://", "postgresql://")
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{plain.rpartition('/')[0]}/{name}"
    try:
        load_demo_data(url, reader_role=None)
        yield url
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["embedded", "postgres"])
def make_service(request: pytest.FixtureRequest, demo_sqlite: Path) -> Any:
    def make(**overrides: Any) -> SupabaseService:
        base: dict[str, Any] = {"statement_timeout_ms": TIMEOUT_MS, "max_result_bytes": CAP}
        if request.param == "embedded":
            base["demo_db_path"] = demo_sqlite
        else:
            base.update(backend="postgres", db_url=request.getfixturevalue("demo_postgres"))
        return SupabaseService(SupabaseSettings(**{**base, **overrides}))

    return make


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("sql", CATALOG_READS)
async def test_catalogs_are_refused_by_default_and_with_every_table_allowed(make_service: Any, sql: str) -> None:
    for service in (make_service(), make_service(allowed_tables=None)):
        with pytest.raises(ToolError, match="catalog table"):
            await service.execute_sql(sql, 10)


@pytest.mark.anyio
async def test_default_allowlist_is_the_demo_tables(make_service: Any) -> None:
    service = make_service()
    assert service.allowed_tables == {"users", "agent_conversations", "kpi_metrics", "kpi_data"}
    with pytest.raises(ToolError, match="not in allowed tables"):
        await service.execute_sql("select * from secrets", 10)
    schema = await service.get_schema(None)
    assert {t.name for t in schema.tables} == {"users", "agent_conversations", "kpi_metrics", "kpi_data"}


@pytest.mark.anyio
async def test_an_operator_may_enable_a_catalog_relation_by_name(make_service: Any) -> None:
    service = make_service(allowed_catalog_tables=("pg_roles", "sqlite_master"))
    sql = "select name from sqlite_master" if service.settings.backend == "embedded" else "select rolname from pg_roles"
    result = await service.execute_sql(sql + " limit 5", 5)
    assert result.row_count >= 1
    with pytest.raises(ToolError, match="catalog table 'pg_shadow'"):
        await service.execute_sql("select * from pg_shadow", 5)


@pytest.mark.anyio
async def test_result_bytes_are_capped(make_service: Any) -> None:
    result = await make_service().execute_sql("select * from agent_conversations", 10_000)
    assert result.truncated and result.truncated_reason == "max_result_bytes"
    assert result.max_result_bytes == CAP and result.result_bytes > CAP
    assert 0 < result.row_count < 2400
    assert len(json.dumps(result.rows, separators=(",", ":"))) <= CAP


@pytest.mark.anyio
async def test_row_cap_still_applies(make_service: Any) -> None:
    result = await make_service().execute_sql("select id from users", 5)
    assert result.truncated and result.truncated_reason == "max_rows" and result.row_count == 5


@pytest.mark.anyio
@pytest.mark.parametrize("sql", RESOURCE_STATEMENTS)
async def test_huge_statements_end_and_the_server_keeps_answering(make_service: Any, sql: str) -> None:
    service = make_service()
    try:
        result = await service.execute_sql(sql, 1000)
    except ToolError as exc:
        # Ended by the statement timeout, a length limit (PostgreSQL's 1 GB bound on one value is
        # reported as "out of memory" when it comes before the timeout), or (SQLite) a missing function.
        assert any(
            w in str(exc) for w in ("timed out", "too big", "too large", "out of memory", "no such", "cannot run")
        ), str(exc)
    else:
        assert result.truncated, result
        assert len(json.dumps(result.rows, separators=(",", ":"))) <= CAP
    after = await service.execute_sql("select count(*) as n from users", 10)
    assert after.rows == [{"n": 240}]
