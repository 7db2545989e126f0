"""`toolagent audit export-head` / `audit verify --head` with an audit key, on SQLite and PostgreSQL:
dropping the newest rows and moving the head back, rewriting the chain, or forging the head file
is detected; without a key, verify says the chain is unkeyed and `--head` is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from toolagent.cli import app
from toolagent.engine.audit import AuditEntry, AuditLog
from toolagent.engine.audit_key import AuditKeyMismatch
from toolagent.store import open_store

KEY = "a key kept outside the store"
runner = CliRunner()


def fill(url: str, n: int, key: str | None = KEY) -> None:
    async def body() -> None:
        async with open_store(url) as store:
            log = AuditLog(store.db, key=None if key is None else key.encode())
            for i in range(n):
                await log.append(
                    AuditEntry(
                        principal="alice",
                        tool="file_read",
                        decision="allow",
                        arguments={"i": i},
                        execution_id=f"exec_{i}",
                    )
                )

    anyio.run(body)


def sql(url: str, *statements: str) -> None:
    async def body() -> None:
        async with open_store(url) as store, store.db.begin() as conn:
            for statement in statements:
                await conn.execute(sa.text(statement))

    anyio.run(body)


def invoke(url: str, *args: str, key: str | None = KEY) -> tuple[int, str, str]:
    env = {"TOOLAGENT_AUDIT_KEY": key or "", "TOOLAGENT_AUDIT_KEY_FILE": ""}
    result = runner.invoke(app, ["--db", url, *args], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_dropping_the_newest_row_and_moving_the_head_back_fails_verify_head(db_url: str, tmp_path: Path) -> None:
    fill(db_url, 4)
    head_file = tmp_path / "head.json"
    code, _, _ = invoke(db_url, "audit", "export-head", "--out", str(head_file))
    assert code == 0 and json.loads(head_file.read_text())["seq"] == 4
    code, stdout, stderr = invoke(db_url, "audit", "verify", "--head", str(head_file))
    assert code == 0 and stdout.startswith("ok: 4 rows") and "unkeyed" not in stderr
    # The row before the newest is valid as it stands: point the head at it and drop row 4.
    sql(
        db_url,
        "DELETE FROM audit_log WHERE seq = 4",
        "UPDATE audit_head SET seq = 3, hash = (SELECT hash FROM audit_log WHERE seq = 3) WHERE id = 1",
    )
    code, _, _ = invoke(db_url, "audit", "verify")
    assert code == 0  # the chain alone cannot tell
    code, _, stderr = invoke(db_url, "audit", "verify", "--head", str(head_file))
    assert code == 1 and "first bad row 4" in stderr and "deleted from the end" in stderr


def test_a_later_head_still_verifies_and_a_rewritten_row_fails(db_url: str, tmp_path: Path) -> None:
    fill(db_url, 2)
    head_file = tmp_path / "head.json"
    assert invoke(db_url, "audit", "export-head", "-o", str(head_file))[0] == 0
    fill(db_url, 2)  # the log grows after the export: still fine
    assert invoke(db_url, "audit", "verify", "--head", str(head_file))[0] == 0
    head = json.loads(head_file.read_text())
    sql(db_url, f"UPDATE audit_log SET hash = '{'0' * 64}' WHERE seq = 2")
    code, _, stderr = invoke(db_url, "audit", "verify", "--head", str(head_file))
    assert code == 1 and "row 2" in stderr
    assert head["seq"] == 2


def test_a_forged_head_file_is_refused(db_url: str, tmp_path: Path) -> None:
    fill(db_url, 3)
    head_file = tmp_path / "head.json"
    assert invoke(db_url, "audit", "export-head", "-o", str(head_file))[0] == 0
    head = json.loads(head_file.read_text())
    head["seq"] = 2  # an attacker moving the pinned head back to match a shortened log
    head_file.write_text(json.dumps(head))
    code, _, stderr = invoke(db_url, "audit", "verify", "--head", str(head_file))
    assert code == 1 and "not signed with this audit key" in stderr
    head_file.write_text("not json")
    assert invoke(db_url, "audit", "verify", "--head", str(head_file))[0] == 2


def test_without_a_key_verify_says_unkeyed_and_head_commands_are_usage_errors(db_url: str, tmp_path: Path) -> None:
    fill(db_url, 2, key=None)
    code, stdout, stderr = invoke(db_url, "audit", "verify", key=None)
    assert code == 0 and stdout.startswith("ok: 2 rows") and "unkeyed" in stderr
    code, _, stderr = invoke(db_url, "audit", "export-head", key=None)
    assert code == 2 and "TOOLAGENT_AUDIT_KEY" in stderr
    head_file = tmp_path / "head.json"
    head_file.write_text("{}")
    code, _, stderr = invoke(db_url, "audit", "verify", "--head", str(head_file), key=None)
    assert code == 2 and "TOOLAGENT_AUDIT_KEY" in stderr


def test_export_head_refuses_a_tampered_log(db_url: str) -> None:
    fill(db_url, 3)
    sql(db_url, "UPDATE audit_log SET reason = 'edited' WHERE seq = 2")
    code, stdout, stderr = invoke(db_url, "audit", "export-head")
    assert code == 1 and stdout == "" and "row 2 was changed" in stderr


def test_a_head_exported_from_an_empty_log_verifies_after_growth(db_url: str, tmp_path: Path) -> None:
    head_file = tmp_path / "head.json"
    assert invoke(db_url, "audit", "export-head", "-o", str(head_file))[0] == 0
    assert json.loads(head_file.read_text())["seq"] == 0
    assert invoke(db_url, "audit", "verify", "--head", str(head_file))[0] == 0
    fill(db_url, 2)
    assert invoke(db_url, "audit", "verify", "--head", str(head_file))[0] == 0


def test_a_process_without_the_key_refuses_to_write_to_a_keyed_chain(db_url: str) -> None:
    fill(db_url, 3)
    assert invoke(db_url, "users", "add", "bob")[0] == 0
    seq_before = anyio.run(head_seq, db_url)
    for key in (None, "another key"):
        code, _, stderr = invoke(db_url, "orgs", "grant", "acme", "bob", "--role", "admin", key=key)
        assert code == 2 and "TOOLAGENT_AUDIT_KEY" in stderr and "Traceback" not in stderr, stderr
        assert len(stderr.strip().splitlines()) == 1, stderr
        code, _, stderr = invoke(db_url, "history", key=key)
        assert code == 2 and "audit chain" in stderr, stderr
    assert anyio.run(head_seq, db_url) == seq_before  # nothing was appended
    code, stdout, _ = invoke(db_url, "audit", "verify")
    assert code == 0 and stdout.startswith(f"ok: {seq_before} rows"), stdout
    # With the key, the same change is made and the chain still verifies.
    assert invoke(db_url, "orgs", "grant", "acme", "bob", "--role", "admin")[0] == 0
    assert invoke(db_url, "audit", "verify")[0] == 0


def test_an_unkeyed_log_refuses_a_keyed_chain_at_start_and_on_append(db_url: str) -> None:
    fill(db_url, 1)

    async def body() -> None:
        async with open_store(db_url) as store:
            unkeyed = AuditLog(store.db, key=None)
            with pytest.raises(AuditKeyMismatch, match="TOOLAGENT_AUDIT_KEY"):
                await unkeyed.check_key()
            with pytest.raises(AuditKeyMismatch, match="has no audit key"):
                await unkeyed.append(AuditEntry(principal="alice", tool="t", decision="allow"))
            verified = await AuditLog(store.db, key=KEY.encode()).verify()
            assert verified.ok and verified.rows_checked == 1

    anyio.run(body)


async def head_seq(url: str) -> int:
    async with open_store(url) as store:
        head = await AuditLog(store.db, key=None).head()
    return 0 if head is None else head[0]
