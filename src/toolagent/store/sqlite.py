"""SQLite's side of the store: the pragmas every connection gets, the synchronous engines of the
hot paths, and the checkpoints of the log run after the inline writer's commits (`store/db.py`
holds the `Database` that uses them).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import anyio
import sqlalchemy as sa
from sqlalchemy import event

#: SQLite log pages that trigger a checkpoint (`sqlite_pragmas`; after the inline writer's
#: commits, `LogCheckpoints`).
WAL_AUTOCHECKPOINT_PAGES = 4000
#: The inline writer's own automatic checkpoint: only a bound on the log for when the checkpoints
#: run after its commits (`LogCheckpoints`) cannot keep it short (they failed, say).
INLINE_AUTOCHECKPOINT_PAGES = 4 * WAL_AUTOCHECKPOINT_PAGES

log = logging.getLogger(__name__)


def sqlite_pragmas(
    dbapi_conn: Any, _record: Any, busy_timeout_ms: int = 30_000, autocheckpoint_pages: int = WAL_AUTOCHECKPOINT_PAGES
) -> None:
    """Set a new connection up (an engine's `connect` event): WAL, its sync level and checkpoints,
    the busy timeout, foreign keys."""
    cur = dbapi_conn.cursor()
    # WAL lets readers and one writer share the file across processes; the busy timeout makes a
    # second process wait for the lock instead of failing at once.
    cur.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL still never corrupts the file; it only lets the last commits before a
    # power loss roll back, and saves an fsync per commit.
    cur.execute("PRAGMA synchronous=NORMAL")
    # A checkpoint (copying the log's pages into the file) runs inside whichever commit finds the
    # log over this many pages. Every call commits a dozen or so pages, mostly the same ones
    # (index tails, the audit head); a longer log writes each of those back once for more
    # commits: about 5% less CPU per governed call than SQLite's 1,000, for a log of up to 16 MB.
    # (The inline writer checkpoints after its commits instead, off the event loop: a bound only.)
    cur.execute(f"PRAGMA wal_autocheckpoint={int(autocheckpoint_pages)}")
    cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def sqlite_sync_engine(
    async_url: str,
    *,
    busy_timeout_ms: int,
    immediate: bool = True,
    autocheckpoint_pages: int = WAL_AUTOCHECKPOINT_PAGES,
) -> sa.Engine:
    """A synchronous engine on the same SQLite file whose transactions start with BEGIN IMMEDIATE
    (or, not `immediate`, whose statements each run on their own, for reads)."""
    engine = sa.create_engine(
        "sqlite+pysqlite://" + async_url.split("://", 1)[1],
        connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
    )

    @event.listens_for(engine, "connect")
    def connect(dbapi_conn: Any, record: Any) -> None:
        sqlite_pragmas(dbapi_conn, record, busy_timeout_ms, autocheckpoint_pages)
        # The driver's implicit BEGIN is turned off; the "begin" event below issues BEGIN IMMEDIATE.
        dbapi_conn.isolation_level = None

    if immediate:

        @event.listens_for(engine, "begin")
        def begin(conn: sa.Connection) -> None:
            # On the driver's connection: SQLAlchemy's own execution of a statement costs more
            # than the statement (every store write begins here).
            try:
                conn.connection.driver_connection.execute("BEGIN IMMEDIATE")  # type: ignore[union-attr]  # open: it is beginning
            except sqlite3.Error as exc:  # as SQLAlchemy would raise it (a busy database, say)
                raise sa.exc.DBAPIError.instance("BEGIN IMMEDIATE", None, exc, sqlite3.Error) from exc

    return engine


class LogCheckpoints:
    """Checkpoints of SQLite's log after the inline writer's commits, on a worker thread.

    A checkpoint copies the log's pages into the database file and syncs both: 12-17 ms on this
    project's test machines for 4,000 pages. SQLite runs it inside whichever commit finds the log
    that long, which on the inline writer froze a busy server's event loop for that long every
    second or so. That connection checkpoints only past `INLINE_AUTOCHECKPOINT_PAGES`; instead,
    every `every` of its commits, the writer that just committed awaits a PASSIVE checkpoint on a
    thread (shielded: its write is committed whatever happens to its caller). The event loop
    serves everything else meanwhile. The group commit's next batch waits for that writer, as it
    waited for the commit, so no write of this process joins the log while it is copied: the
    checkpoint reaches the log's end, and the next commit starts the log over. `every` follows
    the log: after each checkpoint it becomes the number of commits that filled
    `WAL_AUTOCHECKPOINT_PAGES` pages at the rate just seen.
    """

    #: Commits between checkpoints, at first and at the extremes. The first interval leaves a
    #: short-lived process's few commits alone and, at the 100 or so pages a large batch commits,
    #: stays under `INLINE_AUTOCHECKPOINT_PAGES`.
    FIRST_EVERY, FEWEST, MOST = 128, 8, 4096

    def __init__(self, checkpoint: Callable[[], tuple[int, int, int]]) -> None:
        self._checkpoint = checkpoint
        self.every = self.FIRST_EVERY
        self._commits = 0
        self._running = False
        self.runs = 0
        """Checkpoints that ran (for tests and benchmarks)."""
        self.last_thread: int | None = None
        """The thread the last one ran on."""

    def due(self) -> bool:
        """Count an inline commit; True when a checkpoint should follow it (none is under way: a
        write outside the group commit may commit meanwhile)."""
        self._commits += 1
        return self._commits >= self.every and not self._running

    async def run(self) -> None:
        """Checkpoint on a worker thread; a failure is logged (the log is bounded all the same)."""
        commits, self._commits, self._running = self._commits, 0, True
        with anyio.CancelScope(shield=True):
            try:
                _busy, pages, _copied = await anyio.to_thread.run_sync(self._on_thread)
            except Exception:  # noqa: BLE001 - the write it follows is committed: never its failure
                log.warning("checkpoint of the SQLite log failed", exc_info=True)
                return
            finally:
                self._running = False
        self.runs += 1
        if pages > 0:
            self.every = max(self.FEWEST, min(self.MOST, round(commits * WAL_AUTOCHECKPOINT_PAGES / pages)))

    def _on_thread(self) -> tuple[int, int, int]:
        self.last_thread = threading.get_ident()
        return self._checkpoint()


__all__ = [
    "INLINE_AUTOCHECKPOINT_PAGES",
    "WAL_AUTOCHECKPOINT_PAGES",
    "LogCheckpoints",
    "sqlite_pragmas",
    "sqlite_sync_engine",
]
