"""The store's engine: one URL picks SQLite (embedded default) or PostgreSQL; same code for both.

Database driver errors are translated to `StoreError` here and only here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from ..errors import StoreError, UsageError
from . import tables as t
from .migrations import MIGRATIONS

#: Environment variable holding the store URL.
DATABASE_URL_ENV = "TOOLAGENT_DATABASE_URL"
#: Folder of the embedded default store, relative to the working directory.
DEFAULT_HOME = Path(".toolagent")
#: Arbitrary constant key of the PostgreSQL advisory lock that serializes migrations.
_MIGRATION_LOCK_KEY = 7_301_245_119


def default_url() -> str:
    """`TOOLAGENT_DATABASE_URL`, else a SQLite file under `./.toolagent/`."""
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    return f"sqlite+aiosqlite:///{DEFAULT_HOME / 'toolagent.db'}"


def normalize_url(url: str) -> str:
    """Accept the URL spellings people paste (`postgres://`, `postgresql://`, `sqlite:///`)."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    if url.startswith("sqlite:///"):
        return "sqlite+aiosqlite:///" + url[len("sqlite:///"):]
    if url.startswith(("postgresql+psycopg://", "sqlite+aiosqlite://")):
        return url
    raise UsageError(
        f"unsupported database URL {url.split('://')[0]}://...: use sqlite+aiosqlite:///PATH or postgresql://USER@HOST/DB"
    )


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def as_utc(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; they were written as UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


class Database:
    """An async engine plus migrations and error translation."""

    def __init__(self, url: str | None = None) -> None:
        self.url = normalize_url(url or default_url())
        self.is_sqlite = self.url.startswith("sqlite")
        if self.is_sqlite:
            path = self.url.split(":///", 1)[1]
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: AsyncEngine = create_async_engine(self.url, connect_args={"timeout": 30})
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        else:
            self.engine = create_async_engine(self.url, pool_size=10, max_overflow=20, pool_pre_ping=True)

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A transaction; driver errors become `StoreError`."""
        try:
            async with self.engine.begin() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"store error ({self.dialect}): {_short(exc)}") from exc
        except OSError as exc:
            raise StoreError(f"store unreachable ({self.dialect}): {exc}") from exc

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return "sqlite" if self.is_sqlite else "postgresql"

    async def migrate(self) -> list[int]:
        """Apply every migration not applied yet; returns the versions applied now."""
        async with self.begin() as conn:
            return await conn.run_sync(self._migrate_sync)

    def _migrate_sync(self, conn: sa.Connection) -> list[int]:
        if not self.is_sqlite:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        t.schema_migrations.create(conn, checkfirst=True)
        done = {row[0] for row in conn.execute(sa.select(t.schema_migrations.c.version))}
        applied = []
        for m in sorted(MIGRATIONS, key=lambda m: m.version):
            if m.version in done:
                continue
            m.apply(conn)
            conn.execute(t.schema_migrations.insert().values(version=m.version, name=m.name, applied_at=utcnow()))
            applied.append(m.version)
        return applied

    async def schema_version(self) -> int:
        """The highest applied migration."""
        async with self.begin() as conn:
            value = await conn.scalar(sa.select(sa.func.max(t.schema_migrations.c.version)))
            return int(value or 0)

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    # WAL lets readers and one writer share the file across processes; the busy timeout makes a
    # second process wait for the lock instead of failing at once.
    cur.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL still never corrupts the file; it only lets the last commits before a
    # power loss roll back, and saves an fsync per commit.
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
