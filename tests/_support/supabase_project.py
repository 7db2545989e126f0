"""A Supabase-like project for tests of the `supabase` backend: a database on the test
PostgreSQL cluster with Supabase's API roles and default privileges, the demo data, and the
PostgREST stand-in (`postgrest_standin.py`) in front of it on 127.0.0.1.

Roles are cluster-wide, so they are created once under an advisory lock (test workers share the
cluster): `anon`, `authenticated`, `service_role` (NOLOGIN, as on Supabase, service_role with
BYPASSRLS), `authenticator` (LOGIN NOINHERIT, granted all of them, as PostgREST connects), and a
reader role for the anon-key setup. anon's and authenticated's statement timeouts are Supabase's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import jwt
import psycopg

from _support.postgrest_standin import StandIn, serve

#: The project's JWT secret (PostgREST needs at least 32 characters).
JWT_SECRET = "toolagent-test-jwt-secret-of-at-least-32-chars"
#: The dedicated reader role of the anon-key setup.
READER_ROLE = "toolagent_api_reader"
API_ROLES = ("anon", "authenticated", "service_role", READER_ROLE)

_ROLES_SQL = """
DO $do$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'anon') THEN CREATE ROLE anon NOLOGIN NOINHERIT; END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'authenticated') THEN
    CREATE ROLE authenticated NOLOGIN NOINHERIT;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'service_role') THEN
    CREATE ROLE service_role NOLOGIN NOINHERIT BYPASSRLS;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'toolagent_api_reader') THEN
    CREATE ROLE toolagent_api_reader NOLOGIN NOINHERIT;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'authenticator') THEN
    CREATE ROLE authenticator LOGIN NOINHERIT;
  END IF;
END $do$;
GRANT anon, authenticated, service_role, toolagent_api_reader TO authenticator;
ALTER ROLE anon SET statement_timeout = '3s';
ALTER ROLE authenticated SET statement_timeout = '8s';
"""


def plain(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def in_database(url: str, name: str, user: str | None = None) -> str:
    base = plain(url).rpartition("/")[0]
    if user is not None:
        scheme, _, rest = base.partition("://")
        base = f"{scheme}://{user}@{rest.split('@', 1)[-1]}"
    return f"{base}/{name}"


def ensure_roles(base_url: str) -> None:
    """The Supabase API roles, created once per cluster."""
    with psycopg.connect(plain(base_url)) as conn:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('toolagent-tests-supabase-roles'))")
        conn.execute(_ROLES_SQL.encode())


def mint(role: str, secret: str = JWT_SECRET, **claims: object) -> str:
    """A key like Supabase's: an HS256 JWT with `role`, signed with the project secret."""
    now = int(time.time())
    return jwt.encode({"iss": "supabase", "role": role, "iat": now, "exp": now + 3600, **claims}, secret, "HS256")


@dataclass
class Project:
    """One test project."""

    db_url: str
    """libpq URL of the database's owner (what `install-functions --db-url` gets)."""
    url: str
    """The project URL (the stand-in)."""
    standin: StandIn
    service_role_key: str
    anon_key: str
    reader_jwt: str


def create_database(base_url: str, *, demo: bool = True) -> str:
    """A fresh database with Supabase's grants (and the demo data); its owner's URL."""
    from toolagent.servers.supabase import load_demo_data

    ensure_roles(base_url)
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(plain(base_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = in_database(base_url, name)
    if demo:
        load_demo_data(url, reader_role=None)
    with psycopg.connect(url) as conn:
        roles = ", ".join(API_ROLES)
        conn.execute(f"GRANT USAGE ON SCHEMA public TO {roles}")
        # As on Supabase: the API roles may read every table (row-level security is the
        # intended guard there) and get EXECUTE on every new function in public.
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {roles}")
        conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON FUNCTIONS TO {roles}")
        conn.execute(f"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO {roles}")
    return url


def drop_database(base_url: str, url: str) -> None:
    name = url.rpartition("/")[2]
    with psycopg.connect(plain(base_url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def project(
    base_url: str, *, install: bool = True, reader_role: str = "service_role", statement_timeout_ms: int = 15_000
) -> Iterator[Project]:
    """A database, the functions installed for `reader_role` (unless `install` is false), and
    the stand-in serving it."""
    from toolagent.servers.supabase.functions import install_functions

    url = create_database(base_url)
    try:
        if install:
            install_functions(url, reader_role=reader_role, statement_timeout_ms=statement_timeout_ms)
        standin = StandIn(in_database(base_url, url.rpartition("/")[2], user="authenticator"), JWT_SECRET)
        with serve(standin) as project_url:
            yield Project(
                db_url=url,
                url=project_url,
                standin=standin,
                service_role_key=mint("service_role"),
                anon_key=mint("anon"),
                reader_jwt=mint(READER_ROLE),
            )
    finally:
        drop_database(base_url, url)
