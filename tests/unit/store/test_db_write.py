"""`Database.write` and `Database.read`: synchronous transactions for the hot paths, on both stores."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

from toolagent.errors import RateLimited, StoreError, UsageError
from toolagent.store import Store, open_store
from toolagent.store import db as store_db
from toolagent.store import sqlite as store_sqlite
from toolagent.store.tables import agents

pytestmark = pytest.mark.anyio

PROBE = sa.table("write_probe", sa.column("n", sa.Integer))


@contextlib.asynccontextmanager
async def probe_store(url: str) -> AsyncIterator[Store]:
    """A migrated store with an extra table `write_probe(n)`."""
    async with open_store(url) as store:
        await store.db.write(lambda conn: conn.exec_driver_sql("CREATE TABLE write_probe (n INTEGER NOT NULL)"))
        yield store


async def test_write_commits_and_read_sees_it(db_url: str) -> None:
    async with probe_store(db_url) as store:
        await store.db.write(lambda conn, n: conn.execute(PROBE.insert().values(n=n)), 7)
        assert await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n)))) == 7
        # The async connections see the same rows.
        async with store.db.begin() as conn:
            assert await conn.scalar(sa.select(sa.func.count()).select_from(agents)) == 0
            assert await conn.scalar(sa.select(sa.func.sum(PROBE.c.n))) == 7


async def test_an_error_inside_rolls_the_whole_transaction_back(db_url: str) -> None:
    def insert_then_refuse(conn: sa.Connection) -> None:
        conn.execute(PROBE.insert().values(n=1))
        raise RateLimited("full", limit=1, remaining=0, retry_after_s=1.0)

    async with probe_store(db_url) as store:
        with pytest.raises(RateLimited):
            await store.db.write(insert_then_refuse)
        assert await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.count()).select_from(PROBE))) == 0


async def test_database_errors_become_store_errors(db_url: str) -> None:
    async with probe_store(db_url) as store:
        with pytest.raises(StoreError, match="no_such_table|does not exist"):
            await store.db.write(lambda conn: conn.exec_driver_sql("INSERT INTO no_such_table VALUES (1)"))


async def test_sqlite_write_waits_for_another_connections_lock_without_blocking_the_loop(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    released, ticked = threading.Event(), threading.Event()
    loop_ran_while_locked: list[bool] = []
    other: sqlite3.Connection

    def release_later() -> None:
        # The lock is let go once the event loop has ticked a few times while the write waits
        # (or after 10 s, when it could not: the loop was blocked).
        loop_ran_while_locked.append(ticked.wait(10))
        other.execute("INSERT INTO write_probe VALUES (1)")
        other.execute("COMMIT")
        released.set()

    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while not released.is_set():
            ticks += 1
            if ticks == 5:
                ticked.set()
            await anyio.sleep(0.01)

    async with probe_store(f"sqlite+aiosqlite:///{path}") as store:
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
        threading.Thread(target=release_later, daemon=True).start()
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=2)))
            assert released.is_set()  # it waited for the other writer...
        assert loop_ran_while_locked == [True]  # ...on a thread, while the event loop kept running
        total = await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n))))
        assert total == 3
        other.close()


async def test_sqlite_keeps_one_connection_per_thread_across_transactions(tmp_path: Path) -> None:
    """The inline writer and the reader each keep their connection open between transactions (no
    pool checkout per write); a write that raised, or found the database busy, leaves it reusable;
    closing the store closes them."""
    path = tmp_path / "store.db"

    def driver(conn: sa.Connection) -> object:
        return conn.connection.driver_connection

    def refuse(conn: sa.Connection) -> None:
        conn.execute(PROBE.insert().values(n=100))
        raise RateLimited("full", limit=1, remaining=0, retry_after_s=1.0)

    async with probe_store(f"sqlite+aiosqlite:///{path}") as store:
        writer = await store.db.write(driver)
        reader = await store.db.read(driver)
        assert writer is not reader
        pages = await store.db.write(lambda conn: conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar())
        assert pages == store_sqlite.INLINE_AUTOCHECKPOINT_PAGES  # a bound: `LogCheckpoints` runs them
        with pytest.raises(RateLimited):
            await store.db.write(refuse)
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        threading.Timer(0.2, other.execute, ("COMMIT",)).start()
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=1)))  # busy: on the thread
        assert await store.db.write(driver) is writer
        assert await store.db.read(driver) is reader
        checkouts: list[object] = []
        listener = lambda *_: checkouts.append(1)  # noqa: E731
        sa.event.listen(sa.pool.Pool, "checkout", listener)
        try:
            for _ in range(10):
                await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=0)))
                await store.db.read(driver)
        finally:
            sa.event.remove(sa.pool.Pool, "checkout", listener)
        assert checkouts == []
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=2)))
        assert await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n)))) == 3

        # Another thread (its own event loop) gets connections of its own.
        def elsewhere() -> object:
            return anyio.run(store.db.write, driver)

        assert await anyio.to_thread.run_sync(elsewhere) is not writer
        other.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        writer.execute("SELECT 1")  # type: ignore[attr-defined]


async def test_sqlite_checkpoints_follow_the_inline_writers_commits_on_a_worker_thread(tmp_path: Path) -> None:
    """Every `every` inline commits, the log is copied into the database file by a checkpoint run
    on a worker thread, never on the event loop's; `every` then follows the pages the log held."""
    path = tmp_path / "store.db"
    async with probe_store(f"sqlite+aiosqlite:///{path}") as store:
        checkpoints = store.db.log_checkpoints
        assert checkpoints is not None and checkpoints.every == checkpoints.FIRST_EVERY
        runs, every = checkpoints.runs, checkpoints.every
        pages_seen: list[int] = []
        checkpoint = checkpoints._checkpoint

        def counted() -> tuple[int, int, int]:
            answer = checkpoint()
            pages_seen.append(answer[1])
            return answer

        checkpoints._checkpoint = counted
        written = 0
        while checkpoints.runs == runs and written <= every:
            await store.db.write(lambda conn, n=written: conn.execute(PROBE.insert().values(n=n)))
            written += 1
        assert checkpoints.runs == runs + 1 and written <= every  # the store's own commits count too
        assert checkpoints.last_thread is not None and checkpoints.last_thread != threading.get_ident()
        assert pages_seen and pages_seen[0] > 0
        expected = round(every * store_sqlite.WAL_AUTOCHECKPOINT_PAGES / pages_seen[0])
        assert checkpoints.every == max(checkpoints.FEWEST, min(checkpoints.MOST, expected))
        # The database file alone (its log ignored) holds every row written before the checkpoint.
        alone = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            assert alone.execute("SELECT count(*) FROM write_probe").fetchone() == (written,)
        finally:
            alone.close()


async def test_sqlite_a_failed_checkpoint_is_logged_and_the_write_still_answers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with probe_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store:
        checkpoints = store.db.log_checkpoints
        assert checkpoints is not None

        def broken() -> tuple[int, int, int]:
            raise sqlite3.OperationalError("disk I/O error")

        checkpoints._checkpoint, checkpoints.every = broken, 1
        with caplog.at_level("WARNING", logger="toolagent.store.sqlite"):
            assert await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=7)).rowcount) == 1
        assert "checkpoint of the SQLite log failed" in caplog.text
        assert await store.db.read(lambda conn: conn.execute(sa.select(PROBE.c.n)).scalar()) == 7


async def test_no_second_checkpoint_starts_while_one_runs() -> None:
    """A write outside the group commit may commit while a checkpoint runs: it is counted, but no
    second checkpoint starts until the first has ended."""
    release = threading.Event()

    def slow() -> tuple[int, int, int]:
        release.wait(5)
        return 0, 400, 400

    checkpoints = store_sqlite.LogCheckpoints(slow)
    checkpoints.every = 2
    async with anyio.create_task_group() as tg:
        tg.start_soon(checkpoints.run)
        await anyio.sleep(0.05)
        assert [checkpoints.due() for _ in range(3)] == [False, False, False]
        release.set()
    # The commits counted at its start (none: the test started it) set the next interval, at
    # its floor; the three counted meanwhile count towards it.
    assert checkpoints.runs == 1 and checkpoints.every == checkpoints.FEWEST
    assert [checkpoints.due() for _ in range(checkpoints.FEWEST - 3)] == [False] * (checkpoints.FEWEST - 4) + [True]


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:///:memory:",
        "sqlite:///:memory:",
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///file:x?mode=memory&cache=shared",
    ],
)
def test_an_in_memory_sqlite_store_is_refused_with_the_fix(url: str) -> None:
    # Its connections would each open a database of their own: the first write would find no tables.
    with pytest.raises(
        UsageError, match=r"in-memory SQLite store cannot be used .*give --db / TOOLAGENT_DATABASE_URL a file path"
    ):
        store_db.Database(url)


@pytest.mark.postgres
async def test_postgres_replaces_a_connection_that_died_while_idle(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections are not pinged at every checkout; one that idled past `PING_AFTER_IDLE_S` is,
    and a dead one is replaced before the transaction uses it."""
    import psycopg

    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    async with probe_store(pg_url) as store:
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=1)))
        await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.count()).select_from(PROBE)))
        with psycopg.connect(plain, autocommit=True) as admin:  # the server drops every idle session
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        monkeypatch.setattr(store_db, "PING_AFTER_IDLE_S", 0.0)
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=2)))
        total = await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n))))
        assert total == 3


async def test_sqlite_a_connection_that_cannot_open_yet_waits_as_a_busy_write_does(tmp_path: Path) -> None:
    """Opening a kept connection sets WAL mode, which another process's exclusive lock (one closing
    the database, say) refuses at once: the write then waits for the lock on the writer thread
    instead of failing."""
    path = tmp_path / "store.db"
    async with probe_store(f"sqlite+aiosqlite:///{path}") as store:
        await store.db.dispose()  # no connection of the store is open
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("PRAGMA locking_mode=EXCLUSIVE")  # keeps the file locked after its write
        other.execute("INSERT INTO write_probe VALUES (1)")
        threading.Timer(0.3, other.close).start()
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=2)))
        assert await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n)))) == 3


@pytest.mark.postgres
async def test_postgres_a_connection_that_died_in_steady_use_fails_one_write_then_the_pool_renews(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection used within `PING_AFTER_IDLE_S` is not pinged: if the server dropped it, the
    one write that finds it fails (nothing written), and so does the one read (reads have a pool
    of their own); each pool then opens new connections."""
    import psycopg

    plain = pg_url.replace("postgresql+psycopg://", "postgresql://")
    monkeypatch.setattr(store_db, "PING_AFTER_IDLE_S", 3600.0)
    async with probe_store(pg_url) as store:
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=1)))
        with psycopg.connect(plain, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with pytest.raises(StoreError):
            await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=10)))
        await store.db.write(lambda conn: conn.execute(PROBE.insert().values(n=2)))
        with pytest.raises(StoreError):
            await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.count()).select_from(PROBE)))
        total = await store.db.read(lambda conn: conn.scalar(sa.select(sa.func.sum(PROBE.c.n))))
        assert total == 3
