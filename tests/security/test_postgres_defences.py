"""Against a real PostgreSQL: the attribute-notation attacks run when nothing stops them, the
guard stops them before they reach the server, and the reader role load-demo creates refuses
the dangerous calls itself (defence behind the guard).

Skipped without TOOLAGENT_TEST_PG_URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from toolagent.servers.supabase import SupabaseSettings
from toolagent.servers.supabase.demo_data import load_demo_data
from toolagent.servers.supabase.server import SupabaseService

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(120)]

#: Attacks that the guard let through before it knew attribute notation, with a check that
#: they really executed when sent to the server directly.
PASSED_BEFORE: list[tuple[str, str]] = [
    ("select ('.').pg_ls_dir", "rows"),
    ("select (0.01).pg_sleep", "rows"),
    ("select (u).row_to_json from users u limit 1", "rows"),
    ("select ('now').pg_sleep_until", "rows"),
    ("select ('base').pg_ls_dir limit 1", "rows"),
    ("select ('select 1::text::tsvector').ts_stat", "rows"),
]

#: Calls the reader role must be refused by PostgreSQL itself (privileges, not the guard).
READER_REFUSED: list[str] = [
    "select pg_read_file('/etc/passwd')",
    "select pg_ls_dir('.')",
    "select ('/etc/passwd').pg_read_file",
    "select pg_create_physical_replication_slot('toolagent_reader_slot')",
    "select lo_import('/etc/passwd')",
    "select pg_reload_conf()",
    "copy users to '/tmp/toolagent-reader-copy'",
    "copy users from program 'true'",
    "select usename, passwd from pg_shadow",
    "select * from ts_stat('select passwd::tsvector from pg_shadow')",
    "create function public.f() returns int language sql as 'select 1'",
    "create function pg_temp.f() returns int language sql as 'select 1'",
    "create table public.t(x int)",
]


def _plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture(scope="module")
def demo_db(pg_base_url: str) -> Iterator[tuple[str, str]]:
    """A demo database loaded with a reader role; yields (owner URL, reader URL)."""
    import psycopg

    base = _plain(pg_base_url)
    name = f"t_{uuid.uuid4().hex[:12]}"
    role = f"reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    owner = f"{base.rpartition('/')[0]}/{name}"
    scheme, _, rest = owner.partition("://")
    reader = f"{scheme}://{role}:reader-pw@{rest.partition('@')[2]}"
    try:
        load_demo_data(owner, reader_role=role, reader_password="reader-pw")
        yield owner, reader
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _slots(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("select slot_name from pg_replication_slots")}


@pytest.mark.parametrize(("sql", "_"), PASSED_BEFORE)
def test_attack_executes_when_sent_directly(demo_db: tuple[str, str], sql: str, _: str) -> None:
    import psycopg

    with psycopg.connect(demo_db[0], autocommit=True) as conn:
        rows = conn.execute(sql).fetchall()
    assert rows  # the function ran: attribute notation really is a call


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize("allowed_tables", [None, ("users",)])
async def test_guard_refusal_means_the_statement_never_reaches_the_server(
    demo_db: tuple[str, str], allowed_tables: Any
) -> None:
    import psycopg

    owner = demo_db[0]
    slot = f"toolagent_probe_{uuid.uuid4().hex[:8]}"
    attack = f"select ('{slot}').pg_create_physical_replication_slot"
    # Sent directly, the statement creates a slot: a write that outlives the READ ONLY transaction.
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute(attack)
        assert slot in _slots(owner)
        conn.execute("select pg_drop_replication_slot(%s)", [slot])
    service = SupabaseService(SupabaseSettings(backend="postgres", db_url=owner, allowed_tables=allowed_tables))
    with pytest.raises(ToolError, match="attribute access"):
        await service.execute_sql(attack, 10)
    assert slot not in _slots(owner)
    for sql, _ in PASSED_BEFORE:
        with pytest.raises(ToolError, match="SQL|attribute|not a table"):
            await service.execute_sql(sql, 10)


@pytest.mark.parametrize("sql", READER_REFUSED)
def test_reader_role_is_refused_by_postgres(demo_db: tuple[str, str], sql: str) -> None:
    import psycopg

    with psycopg.connect(demo_db[1], autocommit=True) as conn:
        # The role's sessions start read-only; turning that off must not give any right back.
        conn.execute("set default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql)
    assert "toolagent_reader_slot" not in _slots(demo_db[0])


def test_reader_role_reads_the_demo_tables_read_only(demo_db: tuple[str, str]) -> None:
    import psycopg

    with psycopg.connect(demo_db[1], autocommit=True) as conn:
        assert conn.execute("select count(*) from users").fetchone() == (240,)
        assert conn.execute("show default_transaction_read_only").fetchone() == ("on",)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("insert into kpi_metrics values (99, 'x', 'x', 'x', 'x')")
        conn.execute("set default_transaction_read_only = off")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("insert into kpi_metrics values (99, 'x', 'x', 'x', 'x')")
        row = conn.execute(
            "select rolsuper, rolreplication, rolcreatedb, rolcreaterole, rolbypassrls from pg_roles where rolname = current_user"
        ).fetchone()
        assert row == (False, False, False, False, False)
        member_of = {r[0] for r in conn.execute(
            "select b.rolname from pg_auth_members m join pg_roles b on b.oid = m.roleid "
            "join pg_roles r on r.oid = m.member where r.rolname = current_user")}  # fmt: skip
        assert not member_of & {"pg_read_server_files", "pg_signal_backend", "pg_execute_server_program"}


@pytest.mark.anyio
async def test_server_connected_as_the_reader_works(demo_db: tuple[str, str]) -> None:
    service = SupabaseService(SupabaseSettings(backend="postgres", db_url=demo_db[1]))
    result = await service.execute_sql("select count(*) as n from agent_conversations", 10)
    assert result.rows == [{"n": 2400}]
    schema = await service.get_schema(None)
    assert {t.name for t in schema.tables} == {"users", "agent_conversations", "kpi_metrics", "kpi_data"}


@pytest.mark.anyio
async def test_row_functions_are_judged_on_the_live_columns(demo_db: tuple[str, str]) -> None:
    import psycopg

    owner = demo_db[0]
    # A user function of the users row type: `u.leak` is the call leak(u), not a column, and
    # runs whatever it contains (here it only counts its calls, in a table of its own).
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("create table leak_calls (n int)")
        conn.execute(
            "create function leak(users) returns text language sql volatile as "
            "$$ insert into leak_calls values (1) returning 'leaked'::text $$"
        )
        conn.execute("select u.leak from users u limit 1")  # sent directly, it runs
        assert conn.execute("select count(*) from leak_calls").fetchone() == (1,)
    try:
        service = SupabaseService(SupabaseSettings(backend="postgres", db_url=owner))
        with pytest.raises(ToolError, match=r"'u' has no column 'leak', so PostgreSQL calls leak\(u\)"):
            await service.execute_sql("select u.leak from users u limit 1", 10)
        # A built-in row function and a real column still run.
        rows = (await service.execute_sql("select u.row_to_json, u.email from users u limit 1", 10)).rows
        assert len(rows) == 1 and set(rows[0]) == {"row_to_json", "email"}
        with psycopg.connect(owner, autocommit=True) as conn:
            assert conn.execute("select count(*) from leak_calls").fetchone() == (1,)
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("drop function leak(users)")
            conn.execute("drop table leak_calls")
