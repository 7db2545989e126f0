"""The `supabase` backend through the real `supabase` client over HTTP on 127.0.0.1, against the
PostgREST stand-in (`tests/postgrest_standin.py`) in front of the real PostgreSQL 15 test cluster.

PostgREST itself cannot be installed here, so this is the contract as the stand-in copies it
(JWT check, role switch, claims, role and function timeouts), not PostgREST.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import anyio
import psycopg
import pytest
from _support.supabase_project import READER_ROLE, Project, mint, plain, project
from mcp.server.mcpserver.exceptions import ToolError

from toolagent.errors import StoreError
from toolagent.servers.supabase.catalog import Catalog
from toolagent.servers.supabase.functions import EXEC_FUNCTION, install_functions
from toolagent.servers.supabase.generator import generate_sql
from toolagent.servers.supabase.postgres_backend import PostgresBackend
from toolagent.servers.supabase.server import SupabaseService
from toolagent.servers.supabase.settings import SupabaseSettings
from toolagent.servers.supabase.supabase_backend import SupabaseBackend

pytestmark = pytest.mark.postgres
QUESTIONS = [
    "top 10 conversations by date",
    "conversations by status",
    "users per organization",
    "average kpi value per metric",
    "conversations with user email",
    "conversations per month in 2026",
    "top 5 users by message count",
]


@pytest.fixture(scope="module")
def service_project(pg_base_url: str) -> Iterator[Project]:
    with project(pg_base_url) as p:
        yield p


def backend(p: Project, key: str | None = None, **kwargs: object) -> SupabaseBackend:
    return SupabaseBackend(p.url, key or p.service_role_key, 15_000, **kwargs)  # type: ignore[arg-type]


def test_schema_categories_and_rows_match_the_postgres_backend(service_project: Project) -> None:
    https, direct = backend(service_project), PostgresBackend(service_project.db_url, 15_000)
    tables = https.tables()
    assert tables == direct.tables()
    values = https.category_values(tables)
    assert values == direct.category_values(tables) and values[("agent_conversations", "status")]
    catalog = Catalog.from_schema(tables, values)
    for question in QUESTIONS:
        sql = generate_sql(question, catalog, 50).sql
        assert https.execute(sql, 20) == direct.execute(sql, 20), question
    for sql in (
        "SELECT id, id, title FROM agent_conversations ORDER BY id",  # duplicate names
        "SELECT * FROM users WHERE false",  # no rows, still named columns
        "SELECT interval '1 day 2 sec' AS span, decode('00ff', 'hex') AS raw, 1.25::numeric AS n",
    ):
        assert https.execute(sql, 5) == direct.execute(sql, 5), sql


def test_calls_follow_the_rpc_contract_and_reuse_one_client(
    service_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    import supabase

    built: list[object] = []
    real = supabase.create_client

    def counting(*args: object, **kwargs: object) -> object:
        built.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(supabase, "create_client", counting)
    https = backend(service_project)
    before = len(service_project.standin.requests)
    https.execute("SELECT count(*) AS n FROM users", 10)
    https.execute("SELECT count(*) AS n FROM kpi_data", 10)
    assert len(built) == 1
    sent = service_project.standin.requests[before:]
    assert [r["path"] for r in sent] == [f"/rest/v1/rpc/{EXEC_FUNCTION}"] * 2
    headers = sent[0]["headers"]
    assert headers["apikey"] == service_project.service_role_key
    assert headers["authorization"] == f"Bearer {service_project.service_role_key}"
    assert json.loads(sent[0]["body"]) == {"query": "SELECT count(*) AS n FROM users", "max_rows": 10,
                                           "max_bytes": 5_000_000}  # fmt: skip


def test_the_guard_refuses_before_anything_is_sent(service_project: Project) -> None:
    settings = SupabaseSettings.from_env(
        {"SUPABASE_BACKEND": "supabase", "SUPABASE_URL": service_project.url,
         "SUPABASE_SERVICE_ROLE_KEY": service_project.service_role_key}
    )  # fmt: skip
    service = SupabaseService(settings)
    before = len(service_project.standin.requests)

    async def attempt() -> None:
        with pytest.raises(ToolError, match="SQL rejected"):
            await service.execute_sql("DELETE FROM users", 10)
        assert len(service_project.standin.requests) == before  # nothing sent
        result = await service.execute_sql("SELECT count(*) AS n FROM users", 10)
        assert result.rows == [{"n": 240}]

    anyio.run(attempt)
    # The allowed statement, after the read of the schema the guard's columns come from.
    sent = [r["path"] for r in service_project.standin.requests[before:]]
    assert sent == ["/rest/v1/rpc/toolagent_schema", "/rest/v1/rpc/toolagent_exec_sql"], sent


def test_anon_key_with_the_reader_roles_jwt(pg_base_url: str) -> None:
    with project(pg_base_url, reader_role=READER_ROLE) as p:
        reader = backend(p, p.anon_key, bearer=p.reader_jwt)
        assert reader.execute("SELECT count(*) AS n FROM users", 5).rows == [{"n": 240}]
        assert p.standin.requests[-1]["headers"]["authorization"] == f"Bearer {p.reader_jwt}"
        # Neither anon nor service_role holds EXECUTE once the reader role has it.
        for key in (p.anon_key, p.service_role_key):
            with pytest.raises(StoreError, match="permission denied .*for function toolagent_exec_sql"):
                backend(p, key).execute("SELECT 1 AS one", 5)


def test_a_key_signed_with_another_secret_is_rejected(service_project: Project) -> None:
    forged = mint("service_role", secret="x" * 40)
    with pytest.raises(StoreError, match="rejected the key .*Invalid API key.*SUPABASE_SERVICE_ROLE_KEY"):
        backend(service_project, forged).tables()
    # A valid apikey passes the gateway; a bad bearer token is then PostgREST's JWT error.
    with pytest.raises(StoreError, match="rejected the key .*Signature verification failed"):
        backend(service_project, bearer=forged).tables()


def test_missing_functions_name_the_command_that_installs_them(pg_base_url: str) -> None:
    with project(pg_base_url, install=False) as p:
        with pytest.raises(StoreError) as info:
            backend(p).tables()
        assert "toolagent_schema is not installed" in info.value.message
        assert "toolagent supabase install-functions --db-url URL" in info.value.message
        install_functions(p.db_url)
        assert {t.name for t in backend(p).tables()} >= {"users", "kpi_data"}


def test_the_functions_statement_timeout_ends_a_slow_statement(pg_base_url: str) -> None:
    with project(pg_base_url, statement_timeout_ms=300) as p:
        https = SupabaseBackend(p.url, p.service_role_key, 300)
        # The HTTP timeout (300 ms plus a margin) is a guard; the database ends it first.
        with pytest.raises(StoreError, match=r"statement timed out after 300 ms \(canceling statement"):
            https.execute("SELECT pg_sleep(20)", 1)
        assert https.execute("SELECT 1 AS one", 1).rows == [{"one": 1}]


def test_the_stand_in_applies_the_roles_statement_timeout(pg_base_url: str) -> None:
    # As PostgREST does for `ALTER ROLE ... SET statement_timeout` (Supabase: anon 3 s).
    role = f"slow_reader_{uuid.uuid4().hex[:8]}"
    with project(pg_base_url) as p:
        with psycopg.connect(plain(pg_base_url)) as conn:
            conn.execute(f"CREATE ROLE {role} NOLOGIN; GRANT {role} TO authenticator")
            conn.execute(f"ALTER ROLE {role} SET statement_timeout = '300ms'")
        with psycopg.connect(p.db_url) as conn:
            conn.execute(
                "CREATE FUNCTION public.nap() RETURNS int LANGUAGE sql STABLE AS $$ SELECT 1 FROM pg_sleep(20) $$"
            )
            conn.execute(f"GRANT EXECUTE ON FUNCTION public.nap() TO {role}")
        try:
            https = backend(p, mint(role))
            with pytest.raises(StoreError, match="statement timed out"):
                https.rpc("nap", {})
        finally:
            with psycopg.connect(p.db_url) as conn:
                conn.execute("DROP FUNCTION public.nap()")
            with psycopg.connect(plain(pg_base_url)) as conn:
                conn.execute(f"DROP ROLE {role}")


@pytest.mark.parametrize(
    "environ,message",
    [
        ({}, "Required environment variable SUPABASE_URL is not set"),
        (
            {"SUPABASE_URL": "https://abc.supabase.co"},
            "Required environment variable SUPABASE_SERVICE_ROLE_KEY (or SUPABASE_ANON_KEY with "
            "SUPABASE_READER_JWT) is not set",
        ),
        (
            {"SUPABASE_URL": "https://abc.supabase.co", "SUPABASE_ANON_KEY": "k"},
            "Required environment variable SUPABASE_READER_JWT is not set",
        ),
    ],
)
def test_the_server_fails_at_start_naming_the_variable(environ: dict[str, str], message: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUPABASE_")}
    proc = subprocess.run(
        [sys.executable, "-m", "toolagent.servers.supabase"],
        env={**env, "SUPABASE_BACKEND": "supabase", **environ},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert message in proc.stderr
