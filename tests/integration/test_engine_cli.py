"""`toolagent users | keys | executions | history | metrics` through the real CLI on a SQLite store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from toolagent.cli import app
from toolagent.engine import Engine, ExecutionDenied
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.store import open_store

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"


def fill(db: str) -> list[str]:
    """bob runs fs/read twice and is denied sh/run once; carol runs fs/read once."""

    async def body() -> list[str]:
        async def ok(arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(False, None, [], "ok")

        read = ToolSpec("fs/read", "fs", "read", category="file", risk="safe")
        shell = ToolSpec("sh/run", "sh", "run", category="shell")
        ids = []
        async with open_store(db) as store, Engine(store) as engine:
            bob = await engine.principals.get_user("bob")
            carol = await engine.principals.get_user("carol")
            for who in (bob, bob, carol):
                ids.append((await engine.execute(read, {"path": "/x"}, who, ok)).id)
            with pytest.raises(ExecutionDenied):
                await engine.execute(shell, {}, bob, ok)
        return ids

    return anyio.run(body)


def test_users_and_keys(db: str) -> None:
    assert (
        invoke("--db", db, "users", "add", "bob", "--level", "execute_basic")[1]
        == "added user bob (execute_basic, plan free)\n"
    )
    code, stdout, _ = invoke("--db", db, "--json", "users", "add", "root", "--level", "admin", "--plan", "enterprise")
    assert code == 0 and json.loads(stdout)["level"] == "admin"
    code, _, stderr = invoke("--db", db, "users", "add", "bob")
    assert code == 2 and "user 'bob' already exists" in stderr
    code, _, stderr = invoke("--db", db, "users", "add", "eve", "--level", "god")
    assert code == 2 and "unknown permission level 'god'" in stderr
    assert (
        invoke("--db", db, "users", "set-level", "bob", "execute_advanced")[1] == "user bob is now execute_advanced\n"
    )
    assert invoke("--db", db, "users", "set-plan", "bob", "team")[1] == "user bob is now on plan team\n"
    code, stdout, _ = invoke("--db", db, "--json", "users", "list")
    assert [(u["name"], u["level"], u["plan"]) for u in json.loads(stdout)] == [
        ("bob", "execute_advanced", "team"),
        ("root", "admin", "enterprise"),
    ]
    code, _, stderr = invoke("--db", db, "users", "set-level", "ghost", "admin")
    assert code == 1 and "user 'ghost' not found" in stderr
    code, stdout, _ = invoke("--db", db, "--json", "users", "show", "bob")
    assert code == 0 and [lim["limit"] for lim in json.loads(stdout)["limits"]] == [100, 10000]

    code, stdout, stderr = invoke(
        "--db", db, "keys", "create", "--user", "bob", "--scope", "agent:execute:file", "--scope", "agent:execute:web"
    )
    raw = stdout.strip()
    assert code == 0 and raw.startswith("ta_") and "shown only now" in stderr
    code, stdout, _ = invoke("--db", db, "--json", "keys", "list", "--user", "bob")
    [key] = json.loads(stdout)
    assert key["scopes"] == ["agent:execute:file", "agent:execute:web"] and key["active"] and raw not in stdout
    code, stdout, _ = invoke("--db", db, "keys", "revoke", key["id"])
    assert code == 0 and stdout.startswith(f"revoked {key['id']} (bob)")
    code, stdout, _ = invoke("--db", db, "--json", "keys", "list")
    assert json.loads(stdout)[0]["active"] is False
    code, _, stderr = invoke("--db", db, "keys", "create", "--user", "bob", "--scope", "everything")
    assert code == 2 and "invalid scope 'everything'" in stderr


def test_history_executions_and_metrics(db: str) -> None:
    invoke("--db", db, "users", "add", "bob", "--level", "execute_basic", "--plan", "team")
    invoke("--db", db, "users", "add", "carol", "--level", "execute_basic")
    invoke("--db", db, "users", "add", "root", "--level", "admin")
    ids = fill(db)

    code, stdout, stderr = invoke("--db", db, "--user", "bob", "history")
    assert code == 0 and "3 of 3 (offset 0); success 2, failed 1 (denied 1)" in stderr and "sh/run" in stdout
    code, stdout, _ = invoke("--db", db, "--user", "bob", "--json", "history", "--status", "success", "--limit", "1")
    page = json.loads(stdout)
    assert page["totalCount"] == 2 and len(page["executions"]) == 1 and page["executions"][0]["id"] == ids[1]
    code, stdout, _ = invoke("--db", db, "--user", "bob", "--json", "history", "--category", "shell")
    assert [e["denial"] for e in json.loads(stdout)["executions"]] == ["level"]
    code, stdout, _ = invoke(
        "--db", db, "--user", "bob", "--json", "history", "--since", "2000-01-01", "--until", "2000-01-02"
    )
    assert json.loads(stdout)["totalCount"] == 0
    code, _, stderr = invoke("--db", db, "--user", "bob", "history", "--limit", "101")
    assert code == 2 and "limit must be between 1 and 100 (got 101)" in stderr
    code, _, stderr = invoke("--db", db, "--user", "bob", "history", "--all")
    assert code == 1 and "may only see their own executions" in stderr
    code, stdout, _ = invoke("--db", db, "--user", "root", "--json", "history", "--all")
    assert json.loads(stdout)["totalCount"] == 4
    code, _, stderr = invoke("--db", db, "--user", "bob", "history", "--since", "yesterday")
    assert code == 2 and "--since 'yesterday' is not an ISO date" in stderr

    code, stdout, _ = invoke("--db", db, "--user", "bob", "--json", "executions", "show", ids[0])
    assert code == 0 and json.loads(stdout)["status"] == "success"
    code, _, stderr = invoke("--db", db, "--user", "carol", "executions", "show", ids[0])
    assert code == 1 and f"execution '{ids[0]}' not found" in stderr
    code, stdout, _ = invoke("--db", db, "--user", "root", "executions", "show", ids[0])
    assert code == 0 and "fs/read (file, risk safe): success" in stdout
    code, _, stderr = invoke("--db", db, "--user", "bob", "executions", "cancel", ids[0])
    assert code == 2 and "is not running" in stderr
    code, stdout, _ = invoke("--db", db, "--user", "bob", "--json", "executions", "active")
    assert json.loads(stdout) == {"executions": [], "count": 0}

    code, stdout, _ = invoke("--db", db, "--user", "bob", "--json", "metrics")
    data = json.loads(stdout)
    assert data["toolUsageStats"] == {"fs/read": 3, "sh/run": 0} and data["userStats"]["totalExecutions"] == 3
    assert [u["user"] for u in data["users"]] == ["bob"]
    code, stdout, _ = invoke("--db", db, "--user", "root", "--json", "metrics", "--tool", "fs/read")
    assert json.loads(stdout)["registryMetrics"]["totalInvocations"] == 3
    code, stdout, _ = invoke("--db", db, "--user", "root", "metrics", "--prometheus")
    assert code == 0 and 'tool_execution_total{category="file",status="success",tool="fs/read"} 3.0' in stdout
    assert 'tool_permission_denied_total{reason="level",tool="sh/run"} 1.0' in stdout
    code, stdout, _ = invoke("--db", db, "--user", "root", "metrics")
    assert code == 0 and "most used: fs/read (3)" in stdout

    code, stdout, _ = invoke("--db", db, "--json", "executions", "prune")
    assert json.loads(stdout) == {"deleted": 0}
    code, stdout, _ = invoke("--db", db, "executions", "prune", "--older-than-days", "0")
    assert stdout == "deleted 4 executions\n"


def test_local_user_is_created(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "opsperson")
    monkeypatch.delenv("TOOLAGENT_USER", raising=False)
    code, stdout, _ = invoke("--db", db, "--json", "history")
    assert code == 0 and json.loads(stdout)["totalCount"] == 0
    code, stdout, _ = invoke("--db", db, "--json", "users", "list")
    assert [(u["name"], u["level"], u["plan"]) for u in json.loads(stdout)] == [
        ("opsperson", "execute_basic", "enterprise")
    ]
    code, _, stderr = invoke("--db", db, "--user", "nobody", "history")
    assert code == 1 and "user 'nobody' not found" in stderr
