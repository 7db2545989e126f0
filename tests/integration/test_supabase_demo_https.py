"""The demo BUILD end to end through the `supabase` backend: `toolagent demo` seeds the PRD's
record, starts the real stdio Supabase server with SUPABASE_BACKEND=supabase, and that server
reaches the project over HTTP on 127.0.0.1 through the `supabase` client, here the PostgREST
stand-in in front of the real PostgreSQL test cluster (PostgREST itself cannot be installed here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _support.repo import REPO_ROOT
from _support.supabase_project import Project, project

from toolagent.servers.supabase.functions import EXEC_FUNCTION, SCHEMA_FUNCTION

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]
TOOLAGENT = Path(sys.executable).parent / "toolagent"
TOOLS = ["supabase/get-schema", "supabase/generate-sql", "supabase/execute-sql", "supabase/analyze-results"]


@pytest.fixture(scope="module")
def served(pg_base_url: str) -> Iterator[Project]:
    with project(pg_base_url) as p:
        yield p


def toolagent(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SUPABASE_")}
    env = {**base, "TOOLAGENT_MCP_CONFIG": str(REPO_ROOT / "mcp.json"), **env}
    return subprocess.run([str(TOOLAGENT), *args], cwd=cwd, capture_output=True, text=True, timeout=200, env=env)


def https_env(p: Project) -> dict[str, str]:
    return {"SUPABASE_BACKEND": "supabase", "SUPABASE_URL": p.url, "SUPABASE_SERVICE_ROLE_KEY": p.service_role_key}


def steps(stdout: str) -> list[dict[str, Any]]:
    return json.loads(stdout)["deliverable"]["data"]["results"]  # type: ignore[no-any-return]


def test_the_demo_build_runs_through_the_supabase_backend(tmp_path: Path, served: Project) -> None:
    before = len(served.standin.requests)
    proc = toolagent("--json", "demo", cwd=tmp_path, env=https_env(served))
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    results = payload["deliverable"]["data"]["results"]
    assert [s["status"] for s in results] == ["success"] * 4
    schema, generated, executed, analysis = (s["structuredContent"] for s in results)
    assert schema["backend"] == "supabase"
    assert {t["name"] for t in schema["tables"]} == {"users", "agent_conversations", "kpi_metrics", "kpi_data"}
    assert "agent_conversations" in generated["sql"].lower()
    assert executed["row_count"] == 10
    dates = [row["started_at"] for row in executed["rows"]]
    assert dates == sorted(dates, reverse=True)
    with psycopg.connect(served.db_url) as conn:
        newest = conn.execute(
            "SELECT to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') FROM agent_conversations "
            "ORDER BY started_at DESC LIMIT 1"
        ).fetchone()
    assert newest is not None and dates[0].startswith(newest[0])
    assert "stakeholders" in analysis["summary"].lower() and "10 rows" in analysis["summary"]
    assert payload["deliverable"]["metadata"]["toolsUsed"] == TOOLS
    # Everything went over the RPC endpoint: the schema, the category values, the statement.
    paths = [r["path"] for r in served.standin.requests[before:]]
    assert f"/rest/v1/rpc/{SCHEMA_FUNCTION}" in paths and f"/rest/v1/rpc/{EXEC_FUNCTION}" in paths
    assert set(paths) == {f"/rest/v1/rpc/{SCHEMA_FUNCTION}", f"/rest/v1/rpc/{EXEC_FUNCTION}"}


def test_a_write_is_refused_before_it_leaves_the_server(tmp_path: Path, served: Project) -> None:
    env = https_env(served)
    assert toolagent("seed", cwd=tmp_path, env=env).returncode == 0
    override = json.dumps(
        {
            "toolParams": {
                "supabase/generate-sql": {"query": "how many conversations"},
                "supabase/execute-sql": {
                    "sql": "WITH gone AS (DELETE FROM users RETURNING *) SELECT count(*) FROM gone"
                },
            }
        }
    )
    before = len(served.standin.requests)
    proc = toolagent("--json", "build", "demo/supabase-agent", "-o", override, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    results = steps(proc.stdout)
    assert [s["status"] for s in results] == ["success", "success", "failed", "skipped"]
    assert results[2]["error"].startswith("SQL rejected:")
    sent = [json.loads(r["body"]).get("query", "") for r in served.standin.requests[before:]]
    assert not any("DELETE" in q.upper() for q in sent)
    with psycopg.connect(served.db_url) as conn:
        assert conn.execute("SELECT count(*) FROM users").fetchone() == (240,)


def test_the_demo_without_a_key_names_the_variable(tmp_path: Path) -> None:
    env = {"SUPABASE_BACKEND": "supabase", "SUPABASE_URL": "https://abcd.supabase.co"}
    proc = toolagent("--json", "demo", cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert "Required environment variable SUPABASE_SERVICE_ROLE_KEY (or SUPABASE_ANON_KEY" in proc.stdout + proc.stderr
    no_url = toolagent("--json", "demo", cwd=tmp_path, env={"SUPABASE_BACKEND": "supabase"})
    assert no_url.returncode == 1
    assert "Required environment variable SUPABASE_URL is not set" in no_url.stdout + no_url.stderr
