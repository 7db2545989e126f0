"""The Supabase MCP server in process: tool list, annotations, output shapes and the guard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolagent.errors import ConfigError, EnvVarMissing
from toolagent.servers.supabase import SupabaseSettings, build_server
from toolagent.servers.supabase.demo_data import TABLES, ensure_sqlite_demo
from toolagent.servers.supabase.settings import DEFAULT_ALLOWED_TABLES

pytestmark = pytest.mark.anyio

TOOLS = {"get-schema", "generate-sql", "execute-sql", "analyze-results"}
DEMO_TABLES = ["agent_conversations", "kpi_data", "kpi_metrics", "users"]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sqlite_demo(tmp_path_factory.mktemp("supabase") / "demo.sqlite")


def settings(demo_db: Path, **overrides: Any) -> SupabaseSettings:
    return SupabaseSettings(demo_db_path=demo_db, **overrides)


async def call(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def call_error(client: Client, name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args)
    assert result.is_error, result.structured_content
    return result.content[0].text  # type: ignore[union-attr]


async def test_tools_are_read_only_with_output_schemas(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        a = tool.annotations
        assert a is not None
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (
            True,
            False,
            True,
            False,
        )
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    assert tools["generate-sql"].input_schema["required"] == ["query"]
    assert tools["execute-sql"].input_schema["required"] == ["sql"]
    assert tools["analyze-results"].input_schema["required"] == ["rows"]
    max_rows = tools["execute-sql"].input_schema["properties"]["max_rows"]
    assert (max_rows["default"], max_rows["minimum"], max_rows["maximum"]) == (1000, 1, 10000)
    assert tools["generate-sql"].input_schema["properties"]["max_rows"]["default"] == 100
    out = {name: set(t.output_schema["properties"]) for name, t in tools.items()}  # type: ignore[index]
    assert out["get-schema"] >= {"tables", "dialect"}
    assert out["generate-sql"] == {"sql", "tables", "explanation"}
    assert out["execute-sql"] == {
        "columns", "rows", "row_count", "truncated", "truncated_reason", "result_bytes", "max_result_bytes",
        "oversized_values",
    }  # fmt: skip
    assert out["analyze-results"] == {"summary", "stats"}


async def test_get_schema_lists_the_demo_tables(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        schema = await call(client, "get-schema", {})
    assert schema["dialect"] == "postgres" and schema["backend"] == "embedded"
    tables = {t["name"]: t for t in schema["tables"]}
    assert sorted(tables) == DEMO_TABLES
    conv = tables["agent_conversations"]
    assert [c["name"] for c in conv["columns"]] == [
        "id", "user_id", "organization_slug", "agent_slug", "title", "status", "message_count",
        "started_at", "ended_at", "created_at",
    ]  # fmt: skip
    types = {c["name"]: (c["type"], c["nullable"]) for c in conv["columns"]}
    assert types["id"] == ("integer", False)
    assert types["started_at"] == ("timestamptz", False)
    assert types["ended_at"] == ("timestamptz", True)
    assert conv["primary_key"] == ["id"]
    assert conv["foreign_keys"] == [{"column": "user_id", "references_table": "users", "references_column": "id"}]
    assert conv["row_count"] == 2400
    assert tables["kpi_data"]["foreign_keys"] == [
        {"column": "metric_id", "references_table": "kpi_metrics", "references_column": "id"}
    ]
    assert {c["name"]: c["type"] for c in tables["kpi_data"]["columns"]}["value"] == "numeric"
    assert sum(t["row_count"] for t in tables.values()) == 240 + 2400 + 10 + 1380


async def test_get_schema_with_an_allowlist_shows_only_allowed_tables(demo_db: Path) -> None:
    server = build_server(settings(demo_db, allowed_tables=("users", "Kpi_Metrics")))
    async with Client(server) as client:
        schema = await call(client, "get-schema", {})
        assert [t["name"] for t in schema["tables"]] == ["kpi_metrics", "users"]
        one = await call(client, "get-schema", {"tables": ["users"]})
        assert [t["name"] for t in one["tables"]] == ["users"]
        error = await call_error(client, "get-schema", {"tables": ["agent_conversations"]})
        assert "table 'agent_conversations' is not in allowed tables (kpi_metrics, users)" in error
        error = await call_error(client, "execute-sql", {"sql": "SELECT * FROM agent_conversations LIMIT 1"})
        assert "agent_conversations" in error and "not in allowed tables" in error


async def test_get_schema_unknown_table_is_an_error(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db, allowed_tables=None))) as client:
        error = await call_error(client, "get-schema", {"tables": ["nope"]})
    assert "table 'nope' does not exist" in error


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM users", "statement type DELETE is denied"),
        ("DROP TABLE users", "statement type DROP is denied"),
        (
            "WITH gone AS (DELETE FROM users RETURNING id) SELECT * FROM gone",
            "statement type DELETE is denied",
        ),
        ("SELECT 1; SELECT 2", "only one statement is allowed, got 2"),
        ("UPDATE users SET plan = 'free'", "statement type UPDATE is denied"),
        ("INSERT INTO users (id) VALUES (1000)", "statement type INSERT is not allowed in read-only mode"),
    ],
)
async def test_execute_sql_rejects_with_the_guard_reason(demo_db: Path, sql: str, reason: str) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        error = await call_error(client, "execute-sql", {"sql": sql})
        assert "SQL rejected" in error and reason in error
        # Nothing changed.
        counts = await call(client, "execute-sql", {"sql": "SELECT count(*) AS n FROM users"})
    assert counts["rows"] == [{"n": 240}]


async def test_execute_sql_judges_row_calls_on_the_live_columns_read_once_a_minute(demo_db: Path) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    from toolagent.servers.supabase.server import CATALOG_TTL_S, SupabaseService

    now = [1000.0]
    service = SupabaseService(settings(demo_db), clock=lambda: now[0])
    backend = await service.backend()
    reads: list[float] = []
    schema = backend.tables

    def counted() -> list[Any]:
        reads.append(now[0])
        return schema()

    backend.tables = counted  # type: ignore[method-assign]
    # users has no column leak: PostgreSQL would call leak(u), a function the guard does not allow.
    with pytest.raises(ToolError, match=r"'u' has no column 'leak', so PostgreSQL calls leak\(u\)"):
        await service.execute_sql("select u.leak from users u limit 1", 10)
    assert (await service.execute_sql("select u.email from users u limit 1", 10)).row_count == 1
    assert reads == [1000.0]  # one read of the schema serves the calls of a minute
    now[0] += CATALOG_TTL_S + 1
    await service.execute_sql("select u.email from users u limit 1", 10)
    assert reads == [1000.0, 1000.0 + CATALOG_TTL_S + 1]


async def test_execute_sql_rows_are_objects_and_truncation_is_reported(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        result = await call(client, "execute-sql", {"sql": "SELECT id, email FROM users ORDER BY id", "max_rows": 5})
        assert result["columns"] == ["id", "email"]
        assert [r["id"] for r in result["rows"]] == [1, 2, 3, 4, 5]
        assert result["row_count"] == 5 and result["truncated"] is True
        exact = await call(client, "execute-sql", {"sql": "SELECT id FROM users WHERE id <= 5", "max_rows": 5})
        assert exact["row_count"] == 5 and exact["truncated"] is False
        error = await call_error(client, "execute-sql", {"sql": "SELECT 1", "max_rows": 10001})
        assert "max_rows" in error


async def test_execute_sql_values_are_json_safe(demo_db: Path) -> None:
    sql = (
        "SELECT started_at, ended_at, started_at::date AS day, date_trunc('month', started_at) AS month, "
        "EXTRACT(YEAR FROM started_at) AS year, now() - INTERVAL '1 day' < now() AS earlier, "
        "title ILIKE '%REFUND%' AS refund FROM agent_conversations WHERE id = 2400"
    )
    async with Client(build_server(settings(demo_db))) as client:
        row = (await call(client, "execute-sql", {"sql": sql}))["rows"][0]
    assert row["started_at"] == "2026-11-20T22:45:17+00:00"
    assert row["ended_at"] is None
    assert row["day"] == "2026-11-20"
    assert row["month"] == "2026-11-01T00:00:00+00:00"
    assert row["year"] == 2026
    assert row["earlier"] == 1 and row["refund"] == 1


async def test_generate_then_execute_the_demo_flow(demo_db: Path) -> None:
    allowed = ("agent_conversations", "kpi_data", "kpi_metrics", "users")
    async with Client(build_server(settings(demo_db, allowed_tables=allowed))) as client:
        generated = await call(
            client,
            "generate-sql",
            {"query": "top 10 conversations by date", "tables": ["agent_conversations"], "max_rows": 10},
        )
        assert generated["tables"] == ["agent_conversations"]
        assert generated["sql"].rstrip().endswith("LIMIT 10")
        assert generated["explanation"]
        result = await call(client, "execute-sql", {"sql": generated["sql"], "max_rows": 100})
        analysis = await call(
            client, "analyze-results", {**result, "analysis_prompt": "Summarize main findings for stakeholders"}
        )
    assert result["row_count"] == 10 and not result["truncated"]
    assert set(result["columns"]) >= {"id", "status", "started_at"}
    started = [r["started_at"] for r in result["rows"]]
    assert started == sorted(started, reverse=True)
    assert "for stakeholders" in analysis["summary"] and "10 rows" in analysis["summary"]
    assert analysis["stats"]["row_count"] == 10


async def test_generate_sql_respects_the_tables_given(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        error = await call_error(
            client, "generate-sql", {"query": "conversations with user email", "tables": ["agent_conversations"]}
        )
        assert "users" in error and "agent_conversations" in error
        error = await call_error(client, "generate-sql", {"query": "how many users", "tables": ["agent_conversations"]})
        assert "users" in error


async def test_generate_sql_says_what_it_did_not_understand(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        error = await call_error(client, "generate-sql", {"query": "conversations by flavor"})
        assert "'flavor'" in error
        error = await call_error(client, "generate-sql", {"query": "what is the weather in paris"})
        assert "could not tell which table" in error
        error = await call_error(client, "generate-sql", {"query": "failed conversations about unicorns"})
        assert "'about unicorns'" in error or "'unicorns'" in error
        error = await call_error(client, "generate-sql", {"query": "   "})
        assert "empty" in error


async def test_analyze_results_accepts_arrays_with_columns(demo_db: Path) -> None:
    async with Client(build_server(settings(demo_db))) as client:
        analysis = await call(
            client, "analyze-results", {"columns": ["team", "score"], "rows": [["a", 1], ["b", 3]], "row_count": 2}
        )
    stats = {c["name"]: c for c in analysis["stats"]["columns"]}
    assert stats["score"]["mean"] == 2.0 and stats["team"]["distinct"] == 2


async def test_postgres_without_url_fails_each_database_tool() -> None:
    server = build_server(SupabaseSettings(backend="postgres"))
    async with Client(server) as client:
        for name, args in [
            ("get-schema", {}),
            ("execute-sql", {"sql": "SELECT 1"}),
            ("generate-sql", {"query": "how many users"}),
        ]:
            error = await call_error(client, name, args)
            assert error.endswith("Required environment variable SUPABASE_DB_URL is not set")
        # Analysis needs no database.
        await call(client, "analyze-results", {"rows": [{"x": 1}]})


def test_settings_from_env() -> None:
    s = SupabaseSettings.from_env(
        {
            "SUPABASE_BACKEND": "postgres",
            "SUPABASE_DB_URL": "postgres://u@h/db",
            "SUPABASE_ALLOWED_TABLES": " users, kpi_data ,",
            "SUPABASE_STATEMENT_TIMEOUT_MS": "2500",
            "SUPABASE_DEMO_DB": "/tmp/x.sqlite",
        }
    )
    assert s.backend == "postgres" and s.require_db_url() == "postgres://u@h/db"
    assert s.allowed_tables == ("users", "kpi_data")
    assert s.statement_timeout_ms == 2500 and str(s.demo_db_path) == "/tmp/x.sqlite"
    assert not s.llm_enabled
    defaults = SupabaseSettings.from_env({})
    assert defaults.backend == "embedded" and defaults.allowed_tables == DEFAULT_ALLOWED_TABLES == TABLES
    assert SupabaseSettings.from_env({"SUPABASE_ALLOWED_TABLES": "*"}).allowed_tables is None
    assert defaults.max_result_bytes == 5_000_000 and defaults.allowed_catalog_tables == ()
    assert defaults.statement_timeout_ms == 15000
    assert str(defaults.demo_db_path) == "~/.cache/toolagent/supabase-demo.sqlite"
    assert SupabaseSettings(db_url="postgresql+psycopg://u@h/db").require_db_url() == "postgresql://u@h/db"  # type: ignore[arg-type]


def test_settings_errors_name_the_variable() -> None:
    with pytest.raises(EnvVarMissing, match="Required environment variable SUPABASE_DB_URL is not set"):
        SupabaseSettings.from_env({"SUPABASE_BACKEND": "postgres"}).check()
    with pytest.raises(ConfigError, match="SUPABASE_BACKEND"):
        SupabaseSettings.from_env({"SUPABASE_BACKEND": "mysql"})
    with pytest.raises(ConfigError, match="SUPABASE_STATEMENT_TIMEOUT_MS"):
        SupabaseSettings.from_env({"SUPABASE_STATEMENT_TIMEOUT_MS": "soon"})
    with pytest.raises(EnvVarMissing, match="SUPABASE_LLM_ENDPOINT"):
        SupabaseSettings.from_env(
            {"SUPABASE_LLM_PROVIDER": "openai-compatible", "SUPABASE_LLM_MODEL": "m", "SUPABASE_LLM_API_KEY": "k"}
        )
