"""generate-sql over the demo database, judged by the rows its SQL returns.

Each question goes through generate-sql and execute-sql; the rows must equal those of a
hand-written reference query run on the same database at the same moment (so "last 30 days"
is compared against the same clock). `ordered` cases compare row order too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from toolagent.servers.supabase import SupabaseSettings, build_server
from toolagent.servers.supabase.catalog import Catalog
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo
from toolagent.servers.supabase.generator import NotUnderstood, generate_sql
from toolagent.servers.supabase.sqlite_backend import SqliteBackend


@dataclass(frozen=True)
class Case:
    question: str
    reference: str
    ordered: bool = False
    tables: tuple[str, ...] | None = None
    max_rows: int = 100


CASES = [
    Case("how many users", "SELECT count(*) FROM users"),
    Case(
        "top 10 conversations by date",
        "SELECT * FROM agent_conversations ORDER BY started_at DESC, id DESC LIMIT 10",
        ordered=True,
        tables=("agent_conversations",),
        max_rows=10,
    ),  # fmt: skip
    Case(
        "5 most recent conversations",
        "SELECT * FROM agent_conversations c WHERE NOT EXISTS (SELECT 1 FROM agent_conversations d "
        "WHERE d.started_at > c.started_at OR (d.started_at = c.started_at AND d.id > c.id) "
        "OFFSET 4) ORDER BY c.started_at DESC, c.id DESC",
        ordered=True,
    ),
    Case("conversations by status", "SELECT status, count(*) FROM agent_conversations GROUP BY status"),
    Case("users per organization", "SELECT organization_slug, count(id) FROM users GROUP BY 1"),
    Case("count of users by plan", "SELECT plan, count(*) FROM users GROUP BY plan"),
    Case(
        "failed conversations",
        "SELECT * FROM agent_conversations WHERE status = 'failed'",
        max_rows=1000,
    ),
    Case("users on the team plan", "SELECT * FROM users WHERE plan = 'team'"),
    Case(
        "conversations for org acme",
        "SELECT * FROM agent_conversations WHERE organization_slug = 'acme'",
        max_rows=2000,
    ),
    Case(
        "conversations in the last 30 days",
        "SELECT * FROM agent_conversations WHERE started_at > now() - INTERVAL '720 hours'",
        max_rows=5000,
    ),
    Case("users created in 2026", "SELECT * FROM users WHERE EXTRACT(YEAR FROM created_at) = 2026", max_rows=1000),
    Case(
        "conversations this year",
        "SELECT * FROM agent_conversations WHERE EXTRACT(YEAR FROM started_at) = EXTRACT(YEAR FROM now())",
        max_rows=5000,
    ),
    Case("average message count", "SELECT avg(message_count) FROM agent_conversations"),
    Case(
        "total message_count per agent",
        "SELECT agent_slug, sum(message_count) FROM agent_conversations GROUP BY agent_slug",
    ),
    Case(
        "average kpi value per metric",
        "SELECT m.name, avg(d.value) FROM kpi_data d, kpi_metrics m WHERE m.id = d.metric_id GROUP BY m.name",
    ),
    Case(
        "conversations with user email",
        "SELECT c.*, u.email FROM agent_conversations c JOIN users u ON u.id = c.user_id "
        "ORDER BY c.started_at DESC, c.id DESC LIMIT 50",
        ordered=True,
        max_rows=50,
    ),  # fmt: skip
    Case(
        "kpi values with metric name",
        "SELECT d.*, m.name FROM kpi_data d JOIN kpi_metrics m ON m.id = d.metric_id "
        "ORDER BY d.recorded_at DESC, d.id DESC LIMIT 40",
        ordered=True,
        max_rows=40,
    ),  # fmt: skip
    Case("conversations with more than 100 messages", "SELECT * FROM agent_conversations WHERE message_count >= 101"),
    Case(
        "top 5 agents by conversations",
        "SELECT agent_slug, count(*) FROM agent_conversations GROUP BY agent_slug ORDER BY 2 DESC, 1 LIMIT 5",
        ordered=True,
    ),
    Case(
        "conversations per month in 2026",
        "SELECT date_trunc('month', started_at), count(*) FROM agent_conversations "
        "WHERE started_at >= '2026-01-01' AND started_at < '2027-01-01' GROUP BY 1 ORDER BY 1",
        ordered=True,
    ),
    Case(
        "number of failed conversations per agent",
        "SELECT agent_slug, count(*) FROM agent_conversations WHERE status = 'failed' GROUP BY agent_slug",
    ),
    Case(
        "average message count per status",
        "SELECT status, avg(message_count) FROM agent_conversations GROUP BY status",
    ),
    Case(
        "users on the pro plan in acme",
        "SELECT * FROM users WHERE plan = 'pro' AND organization_slug = 'acme'",
    ),
    Case(
        "conversations for wei.patel1@umbrella.example",
        "SELECT c.* FROM agent_conversations c WHERE c.user_id = (SELECT id FROM users WHERE email = 'wei.patel1@umbrella.example')",
    ),
    Case(
        "conversations with title containing 'refund'",
        "SELECT * FROM agent_conversations WHERE lower(title) LIKE '%refund%'",
        max_rows=1000,
    ),
    Case(
        "max message count per organization",
        "SELECT organization_slug, max(message_count) FROM agent_conversations GROUP BY 1",
    ),
    Case(
        "kpi data for revenue in 2026",
        "SELECT d.* FROM kpi_data d WHERE d.metric_id = (SELECT id FROM kpi_metrics WHERE name = 'revenue') "
        "AND d.recorded_at >= '2026-01-01' AND d.recorded_at < '2027-01-01'",
    ),
    Case("how many distinct agents", "SELECT count(DISTINCT agent_slug) FROM agent_conversations"),
    Case(
        "which agent has the most conversations",
        "SELECT agent_slug, count(*) FROM agent_conversations GROUP BY 1 ORDER BY 2 DESC LIMIT 1",
    ),
    Case("admins in globex", "SELECT * FROM users WHERE role = 'admin' AND organization_slug = 'globex'"),
    Case(
        "non-failed conversations for the demo org",
        "SELECT * FROM agent_conversations WHERE organization_slug = 'demo' AND status != 'failed'",
        max_rows=2000,
    ),
    Case(
        "completed or failed conversations last month",
        "SELECT * FROM agent_conversations WHERE status IN ('failed', 'completed') "
        "AND date_trunc('month', started_at) = date_trunc('month', date_trunc('month', now()) - INTERVAL '1 day')",
        max_rows=2000,
    ),
    Case(
        "average nps per organization in 2026",
        "SELECT d.organization_slug, avg(d.value) FROM kpi_data d JOIN kpi_metrics m ON m.id = d.metric_id "
        "WHERE m.name = 'nps' AND EXTRACT(YEAR FROM d.recorded_at) = 2026 GROUP BY 1",
    ),
    Case(
        "total revenue by month for acme",
        "SELECT date_trunc('month', d.recorded_at), sum(d.value) FROM kpi_data d JOIN kpi_metrics m ON m.id = d.metric_id "
        "WHERE m.name = 'revenue' AND d.organization_slug = 'acme' GROUP BY 1 ORDER BY 1",
        ordered=True,
    ),
    Case("number of users by role and plan", "SELECT role, plan, count(*) FROM users GROUP BY role, plan"),
    Case(
        "conversation with the most messages",
        "SELECT * FROM agent_conversations ORDER BY message_count DESC, id DESC LIMIT 1",
    ),
    Case("oldest 3 users", "SELECT * FROM users ORDER BY created_at LIMIT 3", ordered=True),
    Case(
        "users created between 2025-01-01 and 2025-06-30",
        "SELECT * FROM users WHERE created_at::date BETWEEN '2025-01-01' AND '2025-06-30'",
    ),
    Case(
        "conversations ordered by message count ascending",
        "SELECT * FROM agent_conversations ORDER BY message_count, id LIMIT 20",
        ordered=True,
        max_rows=20,
    ),  # fmt: skip
    Case(
        "conversations per user",
        "SELECT u.email, count(*) FROM agent_conversations c JOIN users u ON u.id = c.user_id GROUP BY u.email",
        max_rows=500,
    ),
    Case(
        "top 5 users by message count",
        "SELECT u.email, sum(c.message_count) FROM users u JOIN agent_conversations c ON c.user_id = u.id "
        "GROUP BY u.email ORDER BY 2 DESC, 1 LIMIT 5",
        ordered=True,
    ),
    Case(
        "agents with more than 400 conversations",
        "SELECT agent_slug, count(*) FROM agent_conversations GROUP BY 1 HAVING count(*) > 400",
    ),
    Case(
        "how many users signed up per month in 2026",
        "SELECT date_trunc('month', created_at), count(*) FROM users WHERE created_at >= '2026-01-01' "
        "GROUP BY 1 ORDER BY 1",
        ordered=True,
    ),
    Case("finance metrics", "SELECT * FROM kpi_metrics WHERE category = 'finance'"),
    Case(
        "average message count of ended conversations per agent",
        "SELECT agent_slug, avg(message_count) FROM agent_conversations WHERE status <> 'active' GROUP BY 1",
    ),
    Case(
        "how many users signed up this year", "SELECT count(*) FROM users WHERE created_at >= date_trunc('year', now())"
    ),
    Case(
        "abandoned conversations per agent in 2025",
        "SELECT agent_slug, count(*) FROM agent_conversations WHERE status = 'abandoned' "
        "AND started_at < '2026-01-01' GROUP BY 1",
    ),
]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_sqlite_demo(tmp_path_factory.mktemp("supabase") / "demo.sqlite")


def _normal(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def _rows(rows: Sequence[dict[str, Any]], ordered: bool) -> list[tuple[Any, ...]]:
    out = [tuple(_normal(v) for v in row.values()) for row in rows]
    return out if ordered else sorted(out, key=repr)


async def _ask(client: Client, case: Case) -> tuple[str, dict[str, Any], dict[str, Any]]:
    args: dict[str, Any] = {"query": case.question, "max_rows": case.max_rows}
    if case.tables:
        args["tables"] = list(case.tables)
    generated = await client.call_tool("generate-sql", args)
    assert not generated.is_error, generated.content
    sql = generated.structured_content["sql"]  # type: ignore[index]
    got = await client.call_tool("execute-sql", {"sql": sql, "max_rows": 10000})
    want = await client.call_tool("execute-sql", {"sql": case.reference, "max_rows": 10000})
    assert not got.is_error, (sql, got.content)
    assert not want.is_error, want.content
    return sql, got.structured_content or {}, want.structured_content or {}


def test_there_are_enough_distinct_questions() -> None:
    assert len({c.question for c in CASES}) == len(CASES) >= 25


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES, ids=[c.question for c in CASES])
async def test_question_gives_the_reference_rows(demo_db: Path, case: Case) -> None:
    async with Client(build_server(SupabaseSettings(demo_db_path=demo_db))) as client:
        sql, got, want = await _ask(client, case)
    assert "LIMIT" in sql
    assert got["row_count"] > 0, f"reference is empty for {case.question!r}; the case proves nothing"
    assert _rows(got["rows"], case.ordered) == _rows(want["rows"], case.ordered), sql


@pytest.mark.anyio
async def test_top_10_conversations_by_date(demo_db: Path) -> None:
    async with Client(build_server(SupabaseSettings(demo_db_path=demo_db))) as client:
        generated = await client.call_tool(
            "generate-sql",
            {"query": "top 10 conversations by date", "tables": ["agent_conversations"], "max_rows": 10},
        )
        sql = generated.structured_content["sql"]  # type: ignore[index]
        result = (await client.call_tool("execute-sql", {"sql": sql, "max_rows": 100})).structured_content
    assert result is not None and result["row_count"] == 10
    assert "ORDER BY started_at DESC" in sql
    conversation_columns = {"id", "user_id", "status", "message_count", "started_at", "ended_at", "created_at"}
    assert conversation_columns <= set(result["columns"])
    started = [row["started_at"] for row in result["rows"]]
    assert started == sorted(started, reverse=True)


@pytest.fixture(scope="module")
def catalog(demo_db: Path) -> Catalog:
    backend = SqliteBackend(demo_db, 15_000)
    tables = backend.tables()
    return Catalog.from_schema(tables, backend.category_values(tables))


@pytest.mark.parametrize("case", CASES, ids=[c.question for c in CASES])
def test_same_question_same_sql(demo_db: Path, catalog: Catalog, case: Case) -> None:
    backend = SqliteBackend(demo_db, 15_000)
    tables = backend.tables()
    rebuilt = Catalog.from_schema(tables, backend.category_values(tables))
    first = generate_sql(case.question, catalog, case.max_rows)
    assert generate_sql(case.question, catalog, case.max_rows) == first
    assert generate_sql(case.question, rebuilt, case.max_rows) == first


def test_the_limit_is_the_smaller_of_n_and_max_rows(catalog: Catalog) -> None:
    assert generate_sql("top 10 conversations by date", catalog, 5).sql.endswith("LIMIT 5")
    assert generate_sql("top 10 conversations by date", catalog, 50).sql.endswith("LIMIT 10")
    assert generate_sql("failed conversations", catalog, 77).sql.endswith("LIMIT 77")
    assert generate_sql("how many users", catalog, 100).sql.endswith("LIMIT 100")


def test_the_generator_reads_the_live_schema(catalog: Catalog) -> None:
    """Rename a table and a value: the generator follows what the catalog says."""
    from toolagent.servers.supabase.models import ColumnInfo, TableInfo

    tickets = TableInfo(
        name="support_tickets",
        columns=[
            ColumnInfo(name="id", type="integer", nullable=False),
            ColumnInfo(name="priority", type="text", nullable=False),
            ColumnInfo(name="opened_at", type="timestamptz", nullable=False),
            ColumnInfo(name="reply_count", type="integer", nullable=False),
        ],
        primary_key=["id"],
        foreign_keys=[],
        row_count=3,
    )
    custom = Catalog.from_schema([tickets], {("support_tickets", "priority"): ("low", "urgent")})
    assert generate_sql("urgent tickets", custom, 100).sql == (
        "SELECT *\nFROM support_tickets\nWHERE priority = 'urgent'\nORDER BY opened_at DESC, id DESC\nLIMIT 100"
    )
    assert "AVG(reply_count)" in generate_sql("average reply count by priority", custom, 100).sql
    with pytest.raises(NotUnderstood):
        generate_sql("failed conversations", custom, 100)


@pytest.mark.parametrize(
    ("question", "message"),
    [
        ("conversations by flavor", "could not understand by 'flavor'"),
        ("the weather in paris", "could not tell which table"),
        ("average title of conversations", "is not a numeric column"),
        ("failed conversations about unicorns", "unicorns"),
        ("", "the question is empty"),
    ],
)
def test_unanswerable_questions_name_what_was_not_understood(catalog: Catalog, question: str, message: str) -> None:
    with pytest.raises(NotUnderstood, match=message):
        generate_sql(question, catalog, 100)


def test_a_table_outside_the_permitted_ones_is_named(catalog: Catalog) -> None:
    only = catalog.restrict(["agent_conversations"])
    with pytest.raises(NotUnderstood, match="needs table 'users'"):
        generate_sql("how many users", only, 100, outside=catalog)
