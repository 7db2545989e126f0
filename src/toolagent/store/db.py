"""The store's engine: one URL picks SQLite (embedded default) or PostgreSQL; same code for both.

Database driver errors are translated to `StoreError` here and only here.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from ..errors import StoreError, UsageError
from ..settings import Settings, user_data_dir
from . import migrations
from .sqlite import INLINE_AUTOCHECKPOINT_PAGES, LogCheckpoints, sqlite_pragmas, sqlite_sync_engine

#: Environment variable holding the store URL.
DATABASE_URL_ENV = "TOOLAGENT_DATABASE_URL"
#: Folder of a store kept in the working directory (the default before the per-user one): used
#: when it holds a store, so an existing `./.toolagent/` keeps working.
DEFAULT_HOME = Path(".toolagent")
#: The SQLite file of the default store, in the user's data directory (or in `DEFAULT_HOME`).
DEFAULT_STORE_FILE = "toolagent.db"
#: Arbitrary constant key of the PostgreSQL advisory lock that serializes migrations.
_MIGRATION_LOCK_KEY = 7_301_245_119
#: Threads running `Database.write` transactions at once on PostgreSQL (SQLite: one), each with a
#: connection of its own: with the async pool's 30 that is 40 per process, so two processes fit
#: PostgreSQL's default of 100 connections.
_PG_WRITERS = 10
#: A pooled PostgreSQL connection idle for longer than this is checked before use (`_ping_when_idle`).
PING_AFTER_IDLE_S = 5.0

T = TypeVar("T")
#: A synchronous connection inside a store transaction: what `Database.write` and `Database.read`
#: hand to their function, and what the repositories' `..._in` verbs take.
Connection = sa.Connection


StoreOrigin = Literal["environment", "working directory", "user default"]


@dataclass(frozen=True)
class DefaultStore:
    """The store used when `--db` is not given, and why that one."""

    url: str
    """Its URL."""
    origin: StoreOrigin
    """`environment`: `TOOLAGENT_DATABASE_URL`; `working directory`: an existing `./.toolagent/`
    store; `user default`: the SQLite file in the user's data directory."""


def default_store() -> DefaultStore:
    """`TOOLAGENT_DATABASE_URL`, else an existing `./.toolagent/toolagent.db`, else
    `toolagent.db` in the user's data directory (`settings.user_data_dir()`), so a `cd` does not
    change which agents, users and keys a command sees."""
    env = Settings.from_env().database_url
    if env:
        return DefaultStore(env, "environment")
    here = DEFAULT_HOME / DEFAULT_STORE_FILE
    if here.is_file():
        return DefaultStore(f"sqlite+aiosqlite:///{here.resolve()}", "working directory")
    return DefaultStore(f"sqlite+aiosqlite:///{user_data_dir() / DEFAULT_STORE_FILE}", "user default")


def default_url() -> str:
    """The URL of `default_store()`."""
    return default_store().url


def shown_url(url: str) -> str:
    """`url` as it may be printed: normalized, with any password masked (`***`)."""
    try:
        normalized = normalize_url(url)
        return sa.engine.make_url(normalized).render_as_string(hide_password=True)
    except (UsageError, ValueError, sa.exc.ArgumentError):
        return "(an invalid URL)"


def normalize_url(url: str) -> str:
    """Accept the URL spellings people paste (`postgres://`, `postgresql://`, `sqlite:///`) and a bare
    SQLite file path (`./x.db`, `~/x.db`, `/var/lib/x.db`), which becomes an absolute `sqlite+aiosqlite` URL."""
    if "://" not in url:
        return f"sqlite+aiosqlite:///{Path(url).expanduser().resolve()}"
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        return _checked_url("postgresql+psycopg://" + url[len("postgresql://") :])
    if url.startswith("sqlite:///"):
        return _checked_url("sqlite+aiosqlite:///" + url[len("sqlite:///") :])
    if url.startswith(("postgresql+psycopg://", "sqlite+aiosqlite://")):
        return _checked_url(url)
    raise UsageError(
        f"unsupported database URL {url.split('://')[0]}://...: use sqlite+aiosqlite:///PATH or postgresql://USER@HOST/DB"
    )


def _checked_url(url: str) -> str:
    """`url` if SQLAlchemy can read it (host, port, database); the error names the setting, never
    the URL itself, which may hold a password."""
    try:
        sa.engine.make_url(url)
    except (ValueError, sa.exc.ArgumentError) as exc:
        raise UsageError(
            f"invalid database URL in --db / {DATABASE_URL_ENV} ({exc}): use sqlite+aiosqlite:///PATH or "
            "postgresql://USER:PASSWORD@HOST:PORT/DB"
        ) from None
    return url


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def _prepare_sqlite_file(path: Path) -> None:
    """Make the SQLite store's folder and file, or say in one line why they cannot be made.

    Raises:
        UsageError: a parent is a regular file, the file system is read-only or a pseudo file
            system (`/proc`, `/sys`), a folder is missing and cannot be made, or permission is denied.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.touch()  # SQLite's own message for a file it cannot make is "unable to open database file"
    except OSError as exc:
        raise UsageError(f"cannot create the SQLite store {path}: {_why_not(path, exc)}; {_DB_FIX}") from exc


_DB_FIX = f"give --db / {DATABASE_URL_ENV} a file in a folder you can write to, e.g. ./.toolagent/toolagent.db"


def _why_not(path: Path, exc: OSError) -> str:
    """The reason a store path cannot be made, naming the part of it at fault."""
    for ancestor in reversed(path.parents):
        if ancestor.exists() and not ancestor.is_dir():
            return f"{ancestor} is a file, not a folder"
    if exc.errno == errno.EROFS:
        return f"{exc.filename or path.parent} is on a read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied on {exc.filename or path.parent}"
    if exc.errno == errno.ENOENT:
        missing = next((a for a in reversed(path.parents) if not a.exists()), None)
        if missing is None:
            return f"no file can be made in {path.parent} (a pseudo file system such as /proc?)"
        return f"{missing} does not exist and cannot be made (a pseudo file system, or a missing mount?)"
    return f"{exc.strerror or exc} ({exc.filename or path})"


class Database:
    """An async engine plus migrations and error translation."""

    def __init__(self, url: str | None = None) -> None:
        self.url = normalize_url(url or default_url())
        self.is_sqlite = self.url.startswith("sqlite")
        if self.is_sqlite:
            path = self.url.split(":///", 1)[1] if ":///" in self.url else ""
            if path in ("", ":memory:") or "mode=memory" in path:
                # Each of the store's connections (the async pool's, the inline writer's, the
                # reader's) would open a database of its own: the first write finds no tables.
                raise UsageError(
                    f"an in-memory SQLite store cannot be used ({self.url}): give --db / {DATABASE_URL_ENV} "
                    "a file path, e.g. sqlite+aiosqlite:///./.toolagent/toolagent.db (a temporary file for "
                    "a throwaway store)"
                )
            if Path(path).is_dir():
                raise UsageError(
                    f"the SQLite store {path} is a directory: give --db / {DATABASE_URL_ENV} a file path, "
                    "e.g. sqlite+aiosqlite:///./.toolagent/toolagent.db"
                )
            _prepare_sqlite_file(Path(path.split("?", 1)[0]))
            self.engine: AsyncEngine = create_async_engine(self.url, connect_args={"timeout": 30})
            event.listen(self.engine.sync_engine, "connect", sqlite_pragmas)
        else:
            self.engine = create_async_engine(self.url, pool_size=10, max_overflow=20)
            _ping_when_idle(self.engine.sync_engine)
        self._sync_engine: sa.Engine | None = None
        self._inline_engine: sa.Engine | None = None
        self._reader: sa.Engine | None = None
        self._sync_engine_lock = threading.Lock()
        # The inline writer's and reader's connections, one per event-loop thread, kept open.
        self._held = _HeldConnections()
        # SQLite has one writer at a time: queueing this process's writers for one thread is
        # cheaper than letting them spin on the database's busy handler.
        self._writers = anyio.CapacityLimiter(1 if self.is_sqlite else _PG_WRITERS)
        self.log_checkpoints = LogCheckpoints(self._checkpoint_log) if self.is_sqlite else None
        """Checkpoints of the log after the inline writer's commits (SQLite only)."""

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

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` in one transaction with a synchronous connection.

        For the hot write paths (every tool execution). With an async connection each statement
        is a round trip through the event loop, and under load each round trip waits for every
        other ready task: a transaction of ten statements held SQLite's write lock for ten turns
        of a busy loop. Here, on SQLite the transaction runs inline on the loop's thread when the
        database is free at once (a few hundred microseconds of blocking, and nothing else in this
        process can interleave), else on the writer thread, which waits for the lock; on
        PostgreSQL it runs on a worker thread. SQLite transactions start with `BEGIN IMMEDIATE`,
        so one that reads before it writes is never refused its upgrade to a writer by another
        process's commit. Once started, a transaction runs to its end even if the caller is
        cancelled. Every so many inline commits, the writer then awaits a checkpoint of the log
        on a thread (`LogCheckpoints`), so that the event loop never stops for one.

        Raises:
            StoreError: The database failed (whatever `fn` raises otherwise propagates as is).
        """
        if self.is_sqlite:
            try:
                value = self._held_transaction("inline", fn, args)
            except _Busy:
                pass  # another connection holds the write lock: wait for it off the loop
            else:
                if self.log_checkpoints is not None and self.log_checkpoints.due():
                    await self.log_checkpoints.run()
                return value
        return await anyio.to_thread.run_sync(self._transaction, self._sync("thread"), fn, args, limiter=self._writers)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(conn, *args)` with a synchronous connection, for a hot read (an API key per request).

        On SQLite it runs inline on the loop's thread (WAL readers do not wait for writers), which
        spares the async pool's checkout and a round trip through the loop per statement; if the
        database is busy at once (recovering its WAL, say) it goes the async way, as on PostgreSQL.
        Inline, each statement reads the latest commit on its own: use it for single-statement reads.

        Raises:
            StoreError: The database failed.
        """
        if self.is_sqlite:
            try:
                return self._held_transaction("reader", fn, args)
            except _Busy:
                pass
        async with self.begin() as conn:
            return await conn.run_sync(fn, *args)

    def _transaction(self, engine: sa.Engine, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            with engine.begin() as conn:
                return fn(conn, *args)
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise translate(exc, self.dialect) from exc

    def _held_transaction(self, kind: Literal["inline", "reader"], fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        """`_transaction` on this thread's kept connection of `kind` (SQLite, on the loop's thread).

        Checking a connection out of a pool and back in (events, a reset) cost about as much as
        the admission's commit; these connections are only ever used by one thread at a time, one
        transaction after another, so each thread keeps its own open.
        """
        try:
            # Opening it may find the database locked too (setting up WAL mode): then it is busy.
            conn = self._held.get(kind, self._sync)
            with conn.begin():
                return fn(conn, *args)
        except sa.exc.OperationalError as exc:
            if _is_busy(exc):
                raise _Busy from exc
            raise translate(exc, self.dialect) from exc
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise translate(exc, self.dialect) from exc

    def _checkpoint_log(self) -> tuple[int, int, int]:
        """A PASSIVE checkpoint of the SQLite log, on a connection of its own (a worker thread's):
        `(busy, pages in the log, pages copied)`. PASSIVE never waits for another connection."""
        with self._sync("reader").connect() as conn:
            busy, pages, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
        return int(busy), int(pages), int(copied)

    def _sync(self, kind: Literal["thread", "inline", "reader"]) -> sa.Engine:
        """A synchronous engine, made on first use: the writer threads' (`thread`), and on SQLite
        the inline writer's and reader's, which never wait for a lock."""
        with self._sync_engine_lock:
            if self._sync_engine is None:
                if self.is_sqlite:
                    self._sync_engine = sqlite_sync_engine(self.url, busy_timeout_ms=30_000)
                    self._inline_engine = sqlite_sync_engine(
                        self.url, busy_timeout_ms=0, autocheckpoint_pages=INLINE_AUTOCHECKPOINT_PAGES
                    )
                    self._reader = sqlite_sync_engine(self.url, busy_timeout_ms=0, immediate=False)
                else:
                    # As many kept connections as writers: an overflow connection is closed when
                    # returned, so a busy process (a worker running several calls) would open and
                    # close a PostgreSQL connection for most of its writes.
                    self._sync_engine = sa.create_engine(self.url, pool_size=_PG_WRITERS, max_overflow=0)
                    _ping_when_idle(self._sync_engine)
        engine = {"thread": self._sync_engine, "inline": self._inline_engine, "reader": self._reader}[kind]
        assert engine is not None, f"no {kind} engine for {self.dialect}"
        return engine

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`."""
        return "sqlite" if self.is_sqlite else "postgresql"

    async def migrate(self, target: str = "head") -> list[int]:
        """Apply every migration not applied yet (Alembic, up to `target`); returns the revision
        numbers applied now. A store made before Alembic is adopted at the version it recorded."""
        async with self.begin() as conn:
            return await conn.run_sync(self._migrate_sync, target)

    def _migrate_sync(self, conn: sa.Connection, target: str) -> list[int]:
        if not self.is_sqlite:
            # Processes starting together would each try to create the tables: the first one
            # migrates, the others wait here and then find nothing left to do.
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        return migrations.upgrade(conn, target)

    async def schema_version(self) -> int:
        """The number of the newest applied revision (0 for an empty database)."""
        async with self.begin() as conn:
            return migrations.revision_number(await conn.run_sync(migrations.current_revision))

    async def dispose(self) -> None:
        """Close every pooled and kept connection."""
        self._held.close_all()
        await self.engine.dispose()
        for sync in (self._sync_engine, self._inline_engine, self._reader):
            if sync is not None:
                sync.dispose()
        self._sync_engine = self._inline_engine = self._reader = None


def _ping_when_idle(engine: sa.Engine) -> None:
    """Check a pooled PostgreSQL connection with a round trip before use only when it has sat in
    the pool for over `PING_AFTER_IDLE_S` (SQLAlchemy's `pool_pre_ping` checks at every checkout).

    Every round trip costs about 0.1 ms of this process's CPU and twice that in time, and a
    governed call checks out a connection for each of its writes; a connection in steady use
    has just proved itself. One that idled (where a server restart or a firewall may have
    dropped it) is pinged, and a dead one is replaced before the transaction starts.
    """

    @event.listens_for(engine, "checkin")
    def checkin(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def checkout(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since <= PING_AFTER_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)
            dbapi_conn.rollback()  # the ping began a transaction: leave the connection idle
        except engine.dialect.loaded_dbapi.Error as exc:
            # The pool discards this connection and checks out another (a new one if need be).
            raise sa.exc.DisconnectionError(f"idle connection lost: {exc}") from exc


def translate(exc: BaseException, dialect: str) -> BaseException:
    """A driver error as `StoreError` (the original as its cause); anything else as it is."""
    if isinstance(exc, sa.exc.SQLAlchemyError):
        error = StoreError(f"store error ({dialect}): {_short(exc)}")
    elif isinstance(exc, OSError):
        error = StoreError(f"store unreachable ({dialect}): {exc}")
    else:
        return exc
    error.__cause__ = exc
    return error


#: SQLSTATEs of a transaction PostgreSQL rolled back to break a deadlock or a serialization conflict.
_RETRYABLE_STATES = frozenset({"40P01", "40001"})


def is_retryable(exc: BaseException) -> bool:
    """The store rolled the whole transaction back for a conflict with another one: trying it
    again may succeed (a deadlock, a serialization failure)."""
    cause = exc.__cause__ if isinstance(exc, StoreError) else exc
    orig = getattr(cause, "orig", None)
    return getattr(orig, "sqlstate", None) in _RETRYABLE_STATES


class _HeldConnections:
    """Open connections kept per (thread, engine kind), so a thread's transactions skip the pool."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[sa.Connection] = []
        self._lock = threading.Lock()

    def get(self, kind: Any, engine_of: Callable[[Any], sa.Engine]) -> sa.Connection:
        """This thread's connection of `kind`, opened from `engine_of(kind)` on first use."""
        conn: sa.Connection | None = getattr(self._local, kind, None)
        if conn is None or conn.closed:
            conn = engine_of(kind).connect()
            setattr(self._local, kind, conn)
            with self._lock:
                self._all.append(conn)
        return conn

    def close_all(self) -> None:
        """Close every kept connection (a thread that uses the store again opens new ones)."""
        with self._lock:
            held, self._all = self._all, []
        for conn in held:
            conn.close()


class _Busy(Exception):
    """The inline SQLite connection found the database locked (nothing was written)."""


def _is_busy(exc: sa.exc.OperationalError) -> bool:
    return "database is locked" in str(exc.orig) or "database table is locked" in str(exc.orig)


def _short(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
