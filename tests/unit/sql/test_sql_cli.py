"""`toolagent sql check`: JSON output and exit codes (0 allow, 1 reject, 2 usage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolagent.sql.cli import sql_app

runner = CliRunner()


def _invoke(*args: str, stdin: str | None = None) -> tuple[int, dict | None, str]:
    result = runner.invoke(sql_app, ["check", *args], input=stdin)
    payload = json.loads(result.stdout) if result.stdout.strip() else None
    return result.exit_code, payload, result.stderr


def test_allow_prints_json_and_exits_0() -> None:
    code, payload, stderr = _invoke("select count(*) from users")
    assert code == 0
    assert payload == {"verdict": "allow", "reasons": [], "tables": ["users"]}
    assert stderr == ""


def test_reject_prints_reasons_and_exits_1() -> None:
    code, payload, _ = _invoke("DeLeTe FROM users")
    assert code == 1
    assert payload == {"verdict": "reject", "reasons": ["statement type DELETE is denied"], "tables": ["users"]}


def test_allowed_tables_option() -> None:
    code, payload, _ = _invoke(
        "select * from secrets join Users on true", "--allowed-tables", "users, Agent_Conversations"
    )
    assert code == 1
    assert payload is not None
    assert payload["reasons"] == ["table 'secrets' is not in allowed tables (agent_conversations, users)"]
    assert payload["tables"] == ["secrets", "users"]


def test_deny_replaces_defaults() -> None:
    # --deny replaces the defaults: DELETE is no longer a denied operation, though read-only
    # mode still refuses it.
    code, payload, _ = _invoke("delete from users", "--deny", "insert")
    assert code == 1
    assert payload is not None
    assert payload["reasons"] == ["statement type DELETE is not allowed in read-only mode (only SELECT queries are)"]
    code, payload, _ = _invoke("insert into users values (1)", "--deny", "insert,drop")
    assert payload is not None and "statement type INSERT is denied" in payload["reasons"]


def test_max_bytes_option() -> None:
    code, payload, _ = _invoke("select 1234567890", "--max-bytes", "10")
    assert code == 1
    assert payload is not None
    assert payload["reasons"] == ["SQL is 17 bytes, over the limit of 10 bytes"]


def test_reads_stdin() -> None:
    code, payload, _ = _invoke("-", stdin="select 1; select 2")
    assert code == 1
    assert payload is not None
    assert payload["reasons"] == ["only one statement is allowed, got 2"]


def test_reads_file(tmp_path: Path) -> None:
    path = tmp_path / "q.sql"
    path.write_text("select id\nfrom users\nwhere name ilike 'a%'\n", encoding="utf-8")
    code, payload, _ = _invoke(f"@{path}", "--allowed-tables", "users")
    assert code == 0
    assert payload == {"verdict": "allow", "reasons": [], "tables": ["users"]}


def test_dialect_option() -> None:
    code, payload, _ = _invoke("select 1", "--dialect", "mysql")
    assert (code, payload) == (0, {"verdict": "allow", "reasons": [], "tables": []})


USAGE_ERRORS = [
    pytest.param(["select 1", "--dialect", "no-such-dialect"], "Unknown dialect", id="unknown-dialect"),
    pytest.param(["select 1", "--max-bytes", "0"], "--max-bytes must be a positive integer", id="zero-max-bytes"),
    pytest.param(
        ["select 1", "--allowed-tables", '"unterminated'], "unterminated quoted identifier", id="bad-table-name"
    ),
    pytest.param(["@/no/such/file.sql"], "cannot read SQL file", id="missing-file"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    code, payload, stderr = _invoke(*args)
    assert code == 2
    assert payload is None
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_unreadable_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "binary.sql"
    path.write_bytes(b"\xff\xfe\x00select")
    code, payload, stderr = _invoke(f"@{path}")
    assert (code, payload) == (2, None)
    assert "cannot read SQL file" in stderr


def test_click_usage_errors_exit_2() -> None:
    assert runner.invoke(sql_app, ["check"]).exit_code == 2
    assert runner.invoke(sql_app, ["check", "select 1", "--max-bytes", "many"]).exit_code == 2


def test_help_lists_check() -> None:
    result = runner.invoke(sql_app, ["--help"])
    assert result.exit_code == 0
    assert "check" in result.stdout
