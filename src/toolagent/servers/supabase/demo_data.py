"""The demo database: built into SQLite for the embedded backend, or loaded into PostgreSQL.

The source is `seeds/demo_db/` shipped in the package (`toolagent.data`, never the working
directory): `schema.sql` (PostgreSQL DDL that SQLite also runs unchanged) and one CSV file per
table, in the order `TABLES` lists them. Timestamps in the CSV files are UTC
(`YYYY-MM-DD HH:MM:SS`); an empty field is NULL.

The SQLite file records a hash of the seed files in `PRAGMA user_version`; a file whose hash
differs is rebuilt, into a temporary file that replaces the old one atomically, so concurrent
servers never see a half-built database.
"""

from __future__ import annotations

import csv
import hashlib
import os
import sqlite3
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...data import demo_db_dir
from ...errors import ConfigError

#: The demo database's files shipped in the package.
SEED_DIR = demo_db_dir()
#: Demo tables in load order (referenced tables first).
TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")
#: The read-only role `load-demo` creates for the Supabase server.
DEFAULT_READER_ROLE = "toolagent_reader"


def _seed_files(seed_dir: Path) -> list[Path]:
    files = [seed_dir / "schema.sql", *(seed_dir / f"{t}.csv" for t in TABLES)]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"demo database seed files are missing: {', '.join(missing)}")
    return files


def seed_hash(seed_dir: Path = SEED_DIR) -> str:
    """SHA-256 over the seed files' names and contents."""
    digest = hashlib.sha256()
    for path in _seed_files(seed_dir):
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _version_of(digest: str) -> int:
    # user_version is a signed 32-bit integer: keep 31 bits, and never 0 (a fresh file's value).
    return int(digest[:8], 16) % (2**31 - 1) + 1


def _read_csv(path: Path) -> tuple[list[str], list[list[str | None]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        return header, [[v if v != "" else None for v in row] for row in reader]


def _file_version(path: Path) -> int | None:
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def ensure_sqlite_demo(path: Path, seed_dir: Path = SEED_DIR) -> Path:
    """Build the SQLite demo database at `path` unless it is already built from these seeds.

    Returns:
        `path`.

    Raises:
        ConfigError: the seed files are missing or the file cannot be written.
    """
    version = _version_of(seed_hash(seed_dir))
    if path.is_file() and _file_version(path) == version:
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        raise ConfigError(f"cannot create the demo database at {path}: {exc}") from exc
    tmp = Path(tmp_name)
    try:
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript((seed_dir / "schema.sql").read_text(encoding="utf-8"))
            for table in TABLES:
                header, rows = _read_csv(seed_dir / f"{table}.csv")
                columns = ", ".join(header)
                marks = ", ".join("?" for _ in header)
                conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
            conn.execute(f"PRAGMA user_version = {version}")
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_demo_data(
    db_url: str,
    *,
    replace: bool = False,
    seed_dir: Path = SEED_DIR,
    reader_role: str | None = DEFAULT_READER_ROLE,
    reader_password: str | None = None,
) -> dict[str, int]:
    """Create the demo tables in a PostgreSQL database, load their rows, and set up the reader role.

    Args:
        db_url: `postgresql://`, `postgres://` or `postgresql+psycopg://` URL.
        replace: drop existing demo tables first; otherwise existing tables are an error.
        seed_dir: the folder holding schema.sql and the CSV files.
        reader_role: the read-only role the Supabase server should connect as (see
            `create_reader_role`); None leaves roles alone.
        reader_password: its password; None creates it without one (it cannot log in with
            a password until one is set).

    Returns:
        Rows loaded per table.

    Raises:
        ConfigError: a demo table exists and `replace` is false, or the seeds are missing.
    """
    import psycopg

    from .settings import plain_postgres_url

    _seed_files(seed_dir)
    counts: dict[str, int] = {}
    with psycopg.connect(plain_postgres_url(db_url)) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        existing = [
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'public' AND table_name = ANY(%s)",
                [list(TABLES)],
            )
        ]
        if existing and not replace:
            raise ConfigError(f"demo tables already exist: {', '.join(sorted(existing))} (use replace to reload them)")
        for table in reversed(TABLES):
            conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute((seed_dir / "schema.sql").read_text(encoding="utf-8"))
        for table in TABLES:
            with open(seed_dir / f"{table}.csv", encoding="utf-8") as fh:
                header = fh.readline().strip()
                with conn.cursor().copy(f"COPY {table} ({header}) FROM STDIN WITH (FORMAT csv)") as copy:
                    while chunk := fh.read(65536):
                        copy.write(chunk)
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            counts[table] = int(row[0]) if row else 0
        if reader_role is not None:
            create_reader_role(conn, reader_role, reader_password, tables=TABLES)
        conn.commit()
        conn.autocommit = True
        conn.execute(f"ANALYZE {', '.join(TABLES)}")
    return counts


#: Predefined roles that read or write server files, run programs, signal other sessions or
#: read everything; the reader is never a member of them.
_DANGEROUS_ROLES = (
    "pg_read_server_files", "pg_write_server_files", "pg_execute_server_program", "pg_signal_backend",
    "pg_read_all_data", "pg_write_all_data", "pg_read_all_settings", "pg_read_all_stats", "pg_monitor",
)  # fmt: skip


def create_reader_role(conn: Any, role: str, password: str | None, *, tables: Sequence[str]) -> None:
    """Create (or reset) a login role that may only read `tables`, as defence behind the SQL guard.

    The role is no superuser and has no replication, role or database creation rights; it is
    removed from the predefined roles that read server files, run programs or signal other
    backends; it may not create objects in schema public or temporary objects (so no
    functions of its own); and its sessions start read-only with a statement timeout.
    Runs in the caller's transaction on a connection with the rights to do all this.
    """
    from psycopg import sql

    ident = sql.Identifier(role)
    db = conn.execute("SELECT current_database()").fetchone()[0]
    exists = conn.execute("SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = %s", [role]).fetchone()
    if not exists:
        conn.execute(sql.SQL("CREATE ROLE {}").format(ident))
    attrs = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS NOINHERIT"
    password_sql = sql.SQL("PASSWORD {}").format(sql.Literal(password)) if password else sql.SQL("PASSWORD NULL")
    conn.execute(sql.SQL("ALTER ROLE {} WITH " + attrs + " {}").format(ident, password_sql))
    present = {
        r[0]
        for r in conn.execute(
            "SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY(%s)", [list(_DANGEROUS_ROLES)]
        )
    }
    for granted in sorted(present):
        conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), ident))
    # Function creation needs CREATE on a schema (public) or TEMPORARY on the database (pg_temp).
    conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    conn.execute(sql.SQL("REVOKE ALL ON SCHEMA public FROM {}").format(ident))
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident))
    conn.execute(sql.SQL("REVOKE TEMPORARY ON DATABASE {} FROM PUBLIC").format(sql.Identifier(db)))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(sql.Identifier(db), ident))
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(db), ident))
    conn.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {}").format(ident))
    conn.execute(
        sql.SQL("GRANT SELECT ON {} TO {}").format(sql.SQL(", ").join(sql.Identifier(t) for t in tables), ident)
    )
    conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(ident))
    conn.execute(sql.SQL("ALTER ROLE {} SET statement_timeout = '15s'").format(ident))
