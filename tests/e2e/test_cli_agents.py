"""The agents CLI: exit codes, one-line errors, JSON output, seeding and export round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from _support.factories import make_definition
from _support.repo import REPO_ROOT
from typer.testing import CliRunner

from toolagent.cli import app

SEED = str(REPO_ROOT / "seeds" / "demo_supabase_agent.json")
runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_seed_then_list_and_show_four_tools(db: str) -> None:
    code, stdout, _ = invoke("--db", db, "seed", SEED)
    assert code == 0 and "inserted  demo/supabase-agent" in stdout
    code, stdout, _ = invoke("--db", db, "seed", SEED)
    assert code == 0 and "unchanged demo/supabase-agent" in stdout
    code, stdout, _ = invoke("--db", db, "--json", "agents", "list")
    rows = json.loads(stdout)
    assert [r["ref"] for r in rows] == ["demo/supabase-agent"]
    assert len(rows[0]["tools"]) == 4
    code, stdout, _ = invoke("--db", db, "--json", "agents", "show", "demo/supabase-agent")
    shown = json.loads(stdout)
    assert shown["definition"]["configuration"]["tools"][2] == "supabase/execute-sql"


def test_validate_reports_every_error_of_every_file(tmp_path: Path) -> None:
    bad1 = tmp_path / "bad1.yaml"
    bad1.write_text(yaml.safe_dump(make_definition(tools=["nons"], toolParams={}, toolExecutionMode="both")))
    bad2 = tmp_path / "bad2.yaml"
    bad2.write_text("metadata: {name: x}\nconfiguration:\n  tools: []\n")
    code, stdout, stderr = invoke("agents", "validate", SEED, str(bad1), str(bad2))
    assert code == 1
    assert "ok" in stdout and "demo/supabase-agent" in stdout
    assert f"{bad1}: configuration.tools[0]: Tool 'nons' must include namespace: expected 'namespace/tool'" in stderr
    assert f"{bad1}: configuration.toolExecutionMode: invalid toolExecutionMode 'both'" in stderr
    assert f"{bad2}: configuration.tools: No tools configured for this agent" in stderr


def test_validate_all_valid_exits_zero() -> None:
    code, _, _ = invoke("agents", "validate", SEED, str(REPO_ROOT / "agents" / "supabase-agent.yaml"))
    assert code == 0


def test_show_unknown_agent_is_one_line_exit_one(db: str) -> None:
    code, _, stderr = invoke("--db", db, "agents", "show", "demo/nope")
    assert code == 1
    assert "agent 'demo/nope' not found" in stderr and "Traceback" not in stderr


def test_bad_reference_is_usage_error(db: str) -> None:
    code, _, stderr = invoke("--db", db, "agents", "show", "not-a-ref")
    assert code == 2 and "neither an agent file nor ORG/SLUG" in stderr


def test_invalid_file_on_upsert_is_configuration_error(tmp_path: Path, db: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(make_definition(tools=[])))
    code, _, stderr = invoke("--db", db, "agents", "upsert", str(bad))
    assert code == 2 and "No tools configured for this agent" in stderr


def test_upsert_export_round_trip(tmp_path: Path, db: str) -> None:
    src = tmp_path / "probe.yaml"
    src.write_text(yaml.safe_dump(make_definition()))
    assert invoke("--db", db, "agents", "upsert", str(src), "--org", "acme")[0] == 0
    code, stdout, _ = invoke("--db", db, "agents", "export", "acme/probe")
    assert code == 0
    exported = tmp_path / "exported.yaml"
    exported.write_text(stdout)
    code, stdout, _ = invoke("--db", db, "agents", "upsert", str(exported), "--org", "acme")
    assert code == 0 and "unchanged" not in stdout  # normalized text differs from the original
    assert yaml.safe_load(exported.read_text())["configuration"]["tools"] == ["demo/echo", "demo/add"]


def test_schema_is_json_schema_with_configuration() -> None:
    code, stdout, _ = invoke("agents", "schema")
    schema = json.loads(stdout)
    assert code == 0 and schema["$schema"].startswith("https://json-schema.org")
    assert "toolExecutionMode" in json.dumps(schema)


def test_database_url_from_environment(monkeypatch: pytest.MonkeyPatch, db: str) -> None:
    monkeypatch.setenv("TOOLAGENT_DATABASE_URL", db)
    assert invoke("seed", SEED)[0] == 0
    code, stdout, _ = invoke("--json", "agents", "list")
    assert [r["ref"] for r in json.loads(stdout)] == ["demo/supabase-agent"]


def test_unsupported_database_url_is_usage_error() -> None:
    code, _, stderr = invoke("--db", "mysql://x/y", "agents", "list")
    assert code == 2 and "unsupported database URL" in stderr
