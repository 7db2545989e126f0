"""The demo that proves the product: the seeded demo/supabase-agent, through the real stdio
Supabase server, offline on the embedded database and against a real PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _support.repo import REPO_ROOT

pytestmark = pytest.mark.timeout(180)
TOOLAGENT = Path(sys.executable).parent / "toolagent"
TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")


def toolagent(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLAGENT), *args], cwd=cwd, capture_output=True, text=True, timeout=150, env={**os.environ, **(env or {})}
    )


def results(stdout: str) -> list[dict[str, Any]]:
    return json.loads(stdout)["deliverable"]["data"]["results"]  # type: ignore[no-any-return]


def check_top_ten(payload: dict[str, Any]) -> None:
    steps = payload["deliverable"]["data"]["results"]
    assert [s["status"] for s in steps] == ["success"] * 4
    schema, generated, executed, analysis = (s["structuredContent"] for s in steps)
    assert {t["name"] for t in schema["tables"]} >= set(TABLES)
    assert "agent_conversations" in generated["sql"].lower()
    assert executed["row_count"] == 10 and len(executed["rows"]) == 10
    dates = [row["started_at"] for row in executed["rows"]]
    assert dates == sorted(dates, reverse=True)
    assert "stakeholders" in analysis["summary"].lower() and "10 rows" in analysis["summary"]
    # Implicit chaining carried the SQL and the rows along.
    assert steps[2]["paramSources"]["sql"] == "previous:supabase/generate-sql.sql"
    assert steps[3]["paramSources"]["rows"] == "previous:supabase/execute-sql.rows"
    md = payload["deliverable"]["metadata"]
    assert md["toolsExecuted"] == 4 and md["successfulTools"] == 4 and md["failedTools"] == 0
    assert md["toolsUsed"] == [
        "supabase/get-schema",
        "supabase/generate-sql",
        "supabase/execute-sql",
        "supabase/analyze-results",
    ]


def test_demo_command_runs_offline_on_the_embedded_database(tmp_path: Path) -> None:
    env = {"SUPABASE_DEMO_DB": str(tmp_path / "demo.sqlite"), "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json")}
    proc = toolagent("--json", "demo", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    check_top_ten(json.loads(proc.stdout))
    markdown = toolagent("demo", cwd=tmp_path, env=env)
    assert markdown.returncode == 0
    assert markdown.stdout.count("\n| ") >= 11  # header + 10 rows
    assert "Summary for stakeholders" in markdown.stdout and "ORDER BY" in markdown.stdout


def test_seeded_agent_with_prd_payload(tmp_path: Path) -> None:
    env = {"SUPABASE_DEMO_DB": str(tmp_path / "demo.sqlite"), "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json")}
    assert toolagent("seed", cwd=tmp_path, env=env).returncode == 0
    payload = REPO_ROOT / "seeds" / "payloads" / "demo_build.json"
    proc = toolagent("--json", "build", "demo/supabase-agent", "-o", f"@{payload}", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    check_top_ten(json.loads(proc.stdout))


@pytest.fixture
def supabase_pg(pg_url: str) -> str:
    from toolagent.servers.supabase.demo_data import load_demo_data

    load_demo_data(pg_url)
    return pg_url


def row_counts(url: str) -> dict[str, int]:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}  # type: ignore[index]


@pytest.mark.postgres
def test_demo_against_postgresql(tmp_path: Path, supabase_pg: str) -> None:
    env = {
        "SUPABASE_BACKEND": "postgres",
        "SUPABASE_DB_URL": supabase_pg.replace("postgresql+psycopg", "postgresql"),
        "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json"),
    }
    proc = toolagent("--json", "demo", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    check_top_ten(json.loads(proc.stdout))


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM users",
        "DROP TABLE kpi_data",
        "UPDATE users SET plan = 'free'",
        "WITH gone AS (DELETE FROM kpi_data RETURNING *) SELECT count(*) FROM gone",
    ],
)
def test_writes_never_reach_postgresql(tmp_path: Path, supabase_pg: str, sql: str) -> None:
    before = row_counts(supabase_pg)
    env = {
        "SUPABASE_BACKEND": "postgres",
        "SUPABASE_DB_URL": supabase_pg.replace("postgresql+psycopg", "postgresql"),
        "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json"),
    }
    assert toolagent("seed", cwd=tmp_path, env=env).returncode == 0
    override = json.dumps(
        {
            "toolParams": {
                "supabase/generate-sql": {"query": "how many conversations"},
                "supabase/execute-sql": {"sql": sql},
            }
        }
    )
    proc = toolagent("--json", "build", "demo/supabase-agent", "-o", override, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    steps = results(proc.stdout)
    assert [s["status"] for s in steps] == ["success", "success", "failed", "skipped"]
    assert steps[2]["error"].startswith("SQL rejected:")
    assert row_counts(supabase_pg) == before


def test_postgres_backend_without_url_names_the_variable(tmp_path: Path) -> None:
    env = {"SUPABASE_BACKEND": "postgres", "SUPABASE_DB_URL": "", "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json")}
    proc = toolagent("--json", "demo", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert "Required environment variable SUPABASE_DB_URL is not set" in proc.stdout + proc.stderr
