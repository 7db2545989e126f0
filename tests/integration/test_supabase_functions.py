"""The SQL functions of the `supabase` backend on the real PostgreSQL 15 test cluster: installing
(idempotent, versioned, `--print` equivalent), grants (never anon or PUBLIC), read-only
enforcement against every way of writing, and the statement timeout.

These call the functions in SQL, as the reader role, inside a READ WRITE transaction: so what
refuses a write is the function itself, not PostgREST's READ ONLY transaction.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from _support.supabase_project import API_ROLES, READER_ROLE, create_database, drop_database

from toolagent.errors import StoreError
from toolagent.servers.supabase.functions import (
    EXEC_FUNCTION,
    FUNCTIONS_VERSION,
    functions_sql,
    install_functions,
    installed_version,
)

pytestmark = pytest.mark.postgres
TOOLAGENT = Path(sys.executable).parent / "toolagent"
EXEC_SIGNATURE = f"public.{EXEC_FUNCTION}(text, integer, integer)"
SCHEMA_SIGNATURE = "public.toolagent_schema()"


@pytest.fixture
def db(pg_base_url: str) -> Iterator[str]:
    url = create_database(pg_base_url)
    try:
        yield url
    finally:
        drop_database(pg_base_url, url)


@pytest.fixture
def writable(db: str) -> str:
    """Objects the reader role may write to directly, so only the function can be what refuses."""
    with psycopg.connect(db) as conn:
        conn.execute("CREATE TABLE audit_log (id serial PRIMARY KEY, note text)")
        conn.execute("CREATE SEQUENCE ticket_seq")
        conn.execute(
            "CREATE FUNCTION public.write_note(note text) RETURNS int LANGUAGE sql VOLATILE SECURITY INVOKER "
            "AS $$ INSERT INTO audit_log(note) VALUES (note) RETURNING id $$"
        )
        conn.execute(f"GRANT INSERT, SELECT, UPDATE, DELETE ON audit_log TO {READER_ROLE}")
        conn.execute(f"GRANT USAGE, UPDATE ON SEQUENCE audit_log_id_seq, ticket_seq TO {READER_ROLE}")
        conn.execute(f"GRANT EXECUTE ON FUNCTION public.write_note(text) TO {READER_ROLE}")
    install_functions(db, reader_role=READER_ROLE)
    return db


def as_role(url: str, role: str, query: str, params: list[Any] | None = None) -> Any:
    """Run `query` as `role` in a READ WRITE transaction; its single value."""
    with psycopg.connect(url) as conn:
        conn.execute("BEGIN READ WRITE")
        conn.execute(f"SET LOCAL ROLE {role}")
        row = conn.execute(query, params or []).fetchone()
        return row[0] if row else None


def exec_sql(url: str, statement: str, role: str = READER_ROLE, max_rows: int = 100) -> dict[str, Any]:
    text = as_role(url, role, f"SELECT {EXEC_FUNCTION}(%s, %s, %s)::text", [statement, max_rows, 1_000_000])
    return json.loads(text)  # type: ignore[no-any-return]


def execute_grantees(url: str, signature: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE r.rolname END FROM pg_proc p, aclexplode(p.proacl) a "
            "LEFT JOIN pg_roles r ON r.oid = a.grantee WHERE p.oid = to_regprocedure(%s) AND a.grantee <> p.proowner",
            [signature],
        ).fetchall()
    return {r[0] for r in rows}


# -- installing --------------------------------------------------------------------------------


def test_install_is_idempotent_and_versioned(db: str) -> None:
    first = install_functions(db)
    second = install_functions(db)
    assert (first.previous_version, first.version) == (None, FUNCTIONS_VERSION)
    assert (second.previous_version, second.version) == (FUNCTIONS_VERSION, FUNCTIONS_VERSION)
    with psycopg.connect(db) as conn:
        assert installed_version(conn) == FUNCTIONS_VERSION
        count = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('toolagent_schema', 'toolagent_exec_sql')"
        ).fetchone()
    assert count == (2,)  # replaced, not added next to the old ones


def test_install_refuses_to_replace_a_newer_version(db: str) -> None:
    install_functions(db)
    with psycopg.connect(db) as conn:
        conn.execute(f"COMMENT ON FUNCTION {EXEC_SIGNATURE} IS 'toolagent supabase functions v{FUNCTIONS_VERSION + 1}'")
        conn.execute(
            f"COMMENT ON FUNCTION {SCHEMA_SIGNATURE} IS 'toolagent supabase functions v{FUNCTIONS_VERSION + 1}'"
        )
    with pytest.raises(StoreError, match="newer than this toolagent's"):
        install_functions(db)


def test_execute_goes_to_the_reader_role_only_despite_supabase_default_privileges(db: str) -> None:
    # The database grants every new function in public to the API roles, as Supabase does.
    install_functions(db, reader_role=READER_ROLE)
    for signature in (EXEC_SIGNATURE, SCHEMA_SIGNATURE):
        assert execute_grantees(db, signature) == {READER_ROLE}
    for role in ("anon", "authenticated", "service_role"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied for function"):
            exec_sql(db, "SELECT 1 AS one", role=role)
    assert exec_sql(db, "SELECT 1 AS one")["rows"] == [{"f1": 1}]


def test_the_command_installs_and_prints_the_same_functions(db: str, pg_base_url: str) -> None:
    proc = subprocess.run(
        [str(TOOLAGENT), "--json", "supabase", "install-functions", "--db-url", db, "--reader-role", READER_ROLE],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["version"] == FUNCTIONS_VERSION
    installed = {s: execute_grantees(db, s) for s in (EXEC_SIGNATURE, SCHEMA_SIGNATURE)}
    printed = subprocess.run(
        [str(TOOLAGENT), "supabase", "install-functions", "--print", "--reader-role", READER_ROLE],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert printed.returncode == 0 and printed.stdout == functions_sql(READER_ROLE)
    # The printed script, run as the SQL editor would (twice: it is safe to run again), in a fresh database.
    other = create_database(pg_base_url, demo=False)
    try:
        for _ in range(2):
            with psycopg.connect(other, autocommit=True) as conn:
                conn.execute(printed.stdout.encode())
        assert {s: execute_grantees(other, s) for s in installed} == installed
        with psycopg.connect(other) as conn:
            assert installed_version(conn) == FUNCTIONS_VERSION
    finally:
        drop_database(pg_base_url, other)


def test_the_command_names_what_is_missing_or_wrong() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    missing = subprocess.run(
        [str(TOOLAGENT), "supabase", "install-functions"], capture_output=True, text=True, timeout=60, env=env
    )
    assert missing.returncode == 2 and "--db-url is required" in missing.stderr


@pytest.mark.parametrize(
    "role,message",
    [
        ("anon; drop table users", "not a plain lower-case identifier"),
        ("anon", "would let anyone with the project's public key"),
        ("authenticated", "would let anyone"),
    ],
)
def test_the_command_refuses_a_reader_role_open_to_everyone(role: str, message: str) -> None:
    proc = subprocess.run(
        [str(TOOLAGENT), "supabase", "install-functions", "--print", "--reader-role", role],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--reader-role" in proc.stderr and message in " ".join(proc.stderr.split())
    assert proc.stdout == ""


# -- what the functions return -----------------------------------------------------------------


def test_exec_sql_keeps_column_order_and_duplicate_names(writable: str) -> None:
    result = exec_sql(writable, "SELECT 2 AS b, 1 AS a, 3 AS b")
    assert result["columns"] == ["b", "a", "b"]
    assert [list(row.values()) for row in result["rows"]] == [[2, 1, 3]]


def test_exec_sql_takes_a_statement_ending_in_a_line_comment(writable: str) -> None:
    assert exec_sql(writable, "SELECT 1 AS one -- the answer")["rows"] == [{"f1": 1}]


def test_exec_sql_names_columns_of_an_empty_result_and_caps_rows(writable: str) -> None:
    assert exec_sql(writable, "SELECT id, email FROM users WHERE false") == {
        "columns": ["id", "email"], "rows": [], "oversized": 0, "truncated": None,
    }  # fmt: skip
    capped = exec_sql(writable, "SELECT id FROM users ORDER BY id", max_rows=3)
    assert [r["f1"] for r in capped["rows"]] == [1, 2, 3] and capped["truncated"] == "max_rows"


def test_schema_lists_only_tables_the_caller_may_read(writable: str) -> None:
    with psycopg.connect(writable) as conn:
        conn.execute("CREATE TABLE secrets (id int PRIMARY KEY, token text)")
        conn.execute(f"REVOKE ALL ON secrets FROM {', '.join(API_ROLES)}")
    tables = json.loads(as_role(writable, READER_ROLE, "SELECT toolagent_schema()::text"))
    names = [t["name"] for t in tables]
    assert "secrets" not in names and {"users", "agent_conversations", "kpi_data", "kpi_metrics"} <= set(names)
    conversations = next(t for t in tables if t["name"] == "agent_conversations")
    assert conversations["row_count"] == 2400 and conversations["primary_key"] == ["id"]
    assert conversations["foreign_keys"] == [
        {"column": "user_id", "references_table": "users", "references_column": "id"}
    ]


# -- read-only enforcement ---------------------------------------------------------------------

WRITES = {
    "insert": ("INSERT INTO audit_log(note) VALUES ('x')", "syntax error"),
    "statement break-out": ("SELECT 1) _x; INSERT INTO audit_log(note) VALUES ('x'); SELECT (1", "syntax error"),
    "data-modifying CTE": (
        "WITH gone AS (DELETE FROM audit_log RETURNING *) SELECT count(*) FROM gone",
        "data-modifying statement must be at the top level",
    ),
    "nextval": ("SELECT nextval('ticket_seq')", "cannot execute nextval() in a read-only transaction"),
    "volatile function that writes": ("SELECT write_note('x')", "cannot execute INSERT in a read-only transaction"),
    "switching back to read-write": (
        "SELECT set_config('transaction_read_only', 'off', true)",
        "transaction read-write mode must be set before any query",
    ),
    "setval": ("SELECT setval('ticket_seq', 42)", "cannot execute setval() in a read-only transaction"),
}


@pytest.mark.parametrize("statement,error", list(WRITES.values()), ids=list(WRITES))
def test_every_way_of_writing_is_refused(writable: str, statement: str, error: str) -> None:
    # The reader role itself may write these objects (outside the function it can).
    assert as_role(writable, READER_ROLE, "SELECT nextval('ticket_seq')") == 1
    with pytest.raises(psycopg.Error, match=re.escape(error)):
        exec_sql(writable, statement)
    with psycopg.connect(writable) as conn:
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
        assert conn.execute("SELECT last_value FROM ticket_seq").fetchone() == (1,)


def test_the_function_is_stable_security_invoker_with_its_timeout(writable: str) -> None:
    with psycopg.connect(writable) as conn:
        rows = conn.execute(
            "SELECT proname, provolatile, prosecdef, proconfig FROM pg_proc "
            "WHERE proname IN ('toolagent_schema', 'toolagent_exec_sql') ORDER BY proname"
        ).fetchall()
    for _name, volatility, definer, config in rows:
        assert volatility == "s" and definer is False
        assert "statement_timeout=15000ms" in config


def test_a_statement_timeout_set_before_the_call_stops_it(writable: str) -> None:
    # What PostgREST does with the function's SET statement_timeout: set it before the call.
    with psycopg.connect(writable) as conn, pytest.raises(psycopg.errors.QueryCanceled):
        conn.execute("BEGIN")
        conn.execute(f"SET LOCAL ROLE {READER_ROLE}")
        conn.execute("SET LOCAL statement_timeout = 200")
        conn.execute(f"SELECT {EXEC_FUNCTION}('SELECT pg_sleep(30)', 1, 1000)")
