"""`toolagent audit`: verify exits 0 on an intact log and 1 after tampering; export writes JSON lines."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from toolagent.cli import app
from toolagent.engine.audit import AuditEntry, AuditLog
from toolagent.store import open_store

runner = CliRunner()


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "x.db"


@pytest.fixture
def db(db_file: Path) -> str:
    url = f"sqlite+aiosqlite:///{db_file}"

    async def fill() -> None:
        async with open_store(url) as store:
            log = AuditLog(store.db)
            for i in range(4):
                await log.append(
                    AuditEntry(
                        principal="alice",
                        tool="file_read",
                        risk="safe",
                        level="execute_basic",
                        decision="deny" if i == 2 else "allow",
                        outcome="denied" if i == 2 else None,
                        reason="level [execute_basic] too low" if i == 2 else None,
                        arguments={"path": f"/data/{i}", "api_key": "sk_live_abcdefghijklmnop"},
                        execution_id=f"exec_{i}",
                    )
                )

    anyio.run(fill)
    return url


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_verify_ok_then_tampered(db: str, db_file: Path) -> None:
    code, stdout, _ = invoke("--db", db, "audit", "verify")
    assert code == 0 and stdout.startswith("ok: 4 rows, chain head 4 ")
    with sqlite3.connect(db_file) as conn:
        conn.execute("UPDATE audit_log SET reason = 'all fine' WHERE seq = 3")
    code, _, stderr = invoke("--db", db, "audit", "verify")
    assert code == 1
    assert "first bad row 3" in stderr and "row 3 was changed" in stderr
    code, stdout, _ = invoke("--db", db, "--json", "audit", "verify")
    assert code == 1
    assert json.loads(stdout) | {"head_hash": None} == {
        "ok": False,
        "rows_checked": 3,
        "first_bad_seq": 3,
        "reason": "row 3 was changed: its contents do not match its hash",
        "head_seq": 4,
        "head_hash": None,
        "keyed": False,
    }


def test_verify_detects_a_deleted_last_row(db: str, db_file: Path) -> None:
    with sqlite3.connect(db_file) as conn:
        conn.execute("DELETE FROM audit_log WHERE seq = 4")
    code, _, stderr = invoke("--db", db, "audit", "verify")
    assert code == 1 and "first bad row 4" in stderr and "deleted from the end" in stderr


def test_verify_on_an_empty_store(tmp_path: Path) -> None:
    code, stdout, _ = invoke("--db", f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}", "audit", "verify")
    assert code == 0 and stdout.startswith("ok: 0 rows")


def test_export_jsonl_to_stdout_and_file_and_verify_the_file(db: str, tmp_path: Path) -> None:
    code, stdout, _ = invoke("--db", db, "audit", "export")
    assert code == 0
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4]
    assert rows[2]["decision"] == "deny" and rows[2]["outcome"] == "denied"
    assert rows[0]["arguments"] == {"path": "/data/0", "api_key": "[REDACTED]"}
    assert "sk_live_" not in stdout
    target = tmp_path / "audit.jsonl"
    code, _, stderr = invoke("--db", db, "audit", "export", "--output", str(target))
    assert code == 0 and "wrote 4 audit rows" in stderr
    assert target.read_text() == stdout
    code, stdout, _ = invoke("audit", "verify", "--file", str(target))
    assert code == 0 and stdout.startswith("ok: 4 rows")
    lines = target.read_text().splitlines()
    edited = json.loads(lines[1]) | {"tool": "shell_exec"}
    target.write_text("\n".join([lines[0], json.dumps(edited), *lines[2:]]) + "\n")
    code, _, stderr = invoke("audit", "verify", "--file", str(target))
    assert code == 1 and "first bad row 2" in stderr


def test_export_since(db: str) -> None:
    code, stdout, _ = invoke("--db", db, "audit", "export", "--since", "2999-01-01")
    assert code == 0 and stdout == ""
    code, stdout, _ = invoke("--db", db, "audit", "export", "--since", "2000-01-01T00:00:00Z")
    assert code == 0 and len(stdout.splitlines()) == 4
    code, _, stderr = invoke("--db", db, "audit", "export", "--since", "yesterday")
    assert code == 2 and "--since 'yesterday' is not an ISO date" in stderr


def test_list_newest_rows(db: str) -> None:
    code, stdout, _ = invoke("--db", db, "--json", "audit", "list", "--limit", "2")
    assert code == 0
    assert [r["seq"] for r in json.loads(stdout)] == [3, 4]
    code, stdout, _ = invoke("--db", db, "audit", "list")
    assert code == 0
    seqs = [line.split()[0] for line in stdout.splitlines() if line.split() and line.split()[0].isdigit()]
    assert seqs == ["1", "2", "3", "4"]
