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
from pathlib import Path

from ...data import demo_db_dir
from ...errors import ConfigError

#: The demo database's files shipped in the package.
SEED_DIR = demo_db_dir()
#: Demo tables in load order (referenced tables first).
TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")


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


def load_demo_data(db_url: str, *, replace: bool = False, seed_dir: Path = SEED_DIR) -> dict[str, int]:
    """Create the demo tables in a PostgreSQL database and load their rows.

    Args:
        db_url: `postgresql://`, `postgres://` or `postgresql+psycopg://` URL.
        replace: drop existing demo tables first; otherwise existing tables are an error.
        seed_dir: the folder holding schema.sql and the CSV files.

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
        conn.commit()
        conn.autocommit = True
        conn.execute(f"ANALYZE {', '.join(TABLES)}")
    return counts
