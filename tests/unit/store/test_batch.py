"""Group commit (`store.batch.GroupCommit`): batches by window and size, per-write failures,
retries alone after a failed batch, and cancellation of a waiting caller — on both stores."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from types import SimpleNamespace
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import sqlalchemy as sa

from toolagent.errors import RateLimited, StoreError
from toolagent.store import Store, open_store
from toolagent.store.batch import GroupCommit, read_once
from toolagent.store.db import is_retryable

pytestmark = pytest.mark.anyio

PROBE = sa.table("batch_probe", sa.column("n", sa.Integer), sa.column("tag", sa.String))


@contextlib.asynccontextmanager
async def probe_store(url: str) -> AsyncIterator[Store]:
    """A migrated store with an extra table `batch_probe(n primary key, tag)`."""
    async with open_store(url) as store:
        await store.db.write(
            lambda conn: conn.exec_driver_sql("CREATE TABLE batch_probe (n INTEGER PRIMARY KEY, tag VARCHAR(20))")
        )
        yield store


def insert(conn: sa.Connection, n: int) -> int:
    conn.execute(PROBE.insert().values(n=n, tag="row"))
    return n


async def rows(store: Store) -> list[int]:
    return await store.db.read(lambda conn: [r.n for r in conn.execute(sa.select(PROBE.c.n).order_by(PROBE.c.n))])


async def submit_together(
    batcher: GroupCommit, ns: Sequence[int], write: Callable[[int], Any] = lambda n: insert, *, savepoint: bool = True
) -> dict[int, Any]:
    """One write per `n` submitted at once (`write(n)` is its function, called with `n`); each n's
    answer, or the refusal or store error it raised."""
    results: dict[int, Any] = {}

    async def one(n: int) -> None:
        try:
            results[n] = await batcher.submit(write(n), n, savepoint=savepoint)
        except (RateLimited, StoreError) as exc:
            results[n] = exc

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for n in ns:
                tg.start_soon(one, n)
    return results


async def test_a_lone_write_commits_without_waiting_the_window(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=64)
        with anyio.fail_after(5):
            assert await batcher.submit(insert, 1) == 1
        assert await rows(store) == [1]
        assert batcher.stats.batches == 1


async def test_concurrent_writes_share_a_transaction_until_the_batch_is_full(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=4)
        got: list[int] = []

        async def one(n: int) -> None:
            got.append(await batcher.submit(insert, n))

        with anyio.fail_after(5):  # full batches close at once, whatever the window
            async with anyio.create_task_group() as tg:
                for n in range(8):
                    tg.start_soon(one, n)
        assert sorted(got) == list(range(8))
        assert await rows(store) == list(range(8))
        assert (batcher.stats.batches, batcher.stats.largest) == (2, 4)


async def test_a_batch_closes_at_the_end_of_its_window(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=0.05, max_size=64)
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(batcher.submit, insert, n)
        assert await rows(store) == [0, 1, 2]
        assert (batcher.stats.batches, batcher.stats.largest) == (1, 3)


async def test_a_batch_grows_while_writes_keep_coming(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=30, max_size=64, idle_s=1.0)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(batcher.submit, insert, 0)
                tg.start_soon(batcher.submit, insert, 1)
                for n in range(2, 6):  # each joins well within the idle gap of the one before
                    await anyio.sleep(0.05)
                    tg.start_soon(batcher.submit, insert, n)
        assert await rows(store) == list(range(6))
        assert (batcher.stats.batches, batcher.stats.largest) == (1, 6)


async def test_a_batch_stops_waiting_once_writes_stop_coming(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=64, idle_s=0.05)
        with anyio.fail_after(10):  # not the window: the idle gap closes it
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(batcher.submit, insert, n)
        assert (batcher.stats.batches, batcher.stats.largest) == (1, 3)
        assert await batcher.submit(insert, 3) == 3  # a later write is a batch of its own
        assert (batcher.stats.batches, batcher.stats.largest) == (2, 3)


async def test_a_refusal_inside_a_batch_is_that_writes_own(db_url: str) -> None:
    def insert_then_refuse(conn: sa.Connection, n: int) -> None:
        conn.execute(PROBE.insert().values(n=n, tag="refused"))
        raise RateLimited("full", limit=1, remaining=0, retry_after_s=1.0)

    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=3)
        results = await submit_together(batcher, range(3), lambda n: insert_then_refuse if n == 1 else insert)
        assert batcher.stats.largest == 3
        assert isinstance(results[1], RateLimited)
        assert (results[0], results[2]) == (0, 2)
        assert await rows(store) == [0, 2]  # the refused write's row was rolled back, only it


async def test_a_database_error_inside_a_batch_fails_only_its_write(db_url: str) -> None:
    async with probe_store(db_url) as store:
        await store.db.write(insert, 5)
        batcher = GroupCommit(store.db, window_s=3600, max_size=3)
        results = await submit_together(batcher, (1, 5, 7))  # 5 exists: a primary-key violation
        assert batcher.stats.largest == 3
        assert isinstance(results[5], StoreError)
        assert (results[1], results[7]) == (1, 7)
        assert await rows(store) == [1, 5, 7]


async def test_a_failed_batch_is_tried_again_write_by_write(db_url: str) -> None:
    sealed: list[list[int]] = []

    def seal(conn: sa.Connection, values: list[int]) -> None:
        sealed.append(values)
        if len(values) > 1:
            raise StoreError("the shared part failed")
        if values == [13]:
            raise StoreError("this write's own shared part fails")

    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=3, seal=seal)
        results = await submit_together(batcher, (11, 12, 13))
        assert sealed[0] == [11, 12, 13]
        assert (results[11], results[12]) == (11, 12)
        assert isinstance(results[13], StoreError)
        assert await rows(store) == [11, 12]  # each written once, the failing one not at all


async def test_a_cancelled_waiting_caller_still_gets_its_write_committed_once(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=3, idle_s=3600)
        scopes: dict[int, anyio.CancelScope] = {}
        answered: set[int] = set()
        went_on: set[int] = set()

        async def one(n: int) -> None:
            with anyio.CancelScope() as scope:
                scopes[n] = scope
                assert await batcher.submit(insert, n) == n
                answered.add(n)  # the write's answer arrives: the caller can close what it opened
                await anyio.lowlevel.checkpoint()  # ... and its cancellation comes at its next checkpoint
                went_on.add(n)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 0)  # leads: waits the window for a full batch
                tg.start_soon(one, 1)  # waits for the leader
                await anyio.wait_all_tasks_blocked()
                scopes[0].cancel()
                scopes[1].cancel()
                await anyio.wait_all_tasks_blocked()
                assert await rows(store) == []  # still queued: nothing written yet, nothing dropped
                tg.start_soon(one, 2)  # fills the batch
        assert answered == {0, 1, 2} and went_on == {2}
        assert scopes[0].cancelled_caught and scopes[1].cancelled_caught
        assert await rows(store) == [0, 1, 2]  # each written exactly once
        assert batcher.stats.batches == 1


def test_deadlocks_and_serialization_failures_are_retryable() -> None:
    def failure(state: str) -> StoreError:
        driver = sa.exc.OperationalError("COMMIT", {}, Exception("conflict"))
        driver.orig = SimpleNamespace(sqlstate=state)  # type: ignore[assignment]
        error = StoreError("conflict")
        error.__cause__ = driver
        return error

    assert is_retryable(failure("40P01")) and is_retryable(failure("40001"))
    assert not is_retryable(failure("23505")) and not is_retryable(StoreError("down"))


async def test_the_recorder_takes_its_batch_settings_from_the_runtimes_settings(tmp_path: Any) -> None:
    from toolagent.errors import UsageError
    from toolagent.runtime import Runtime
    from toolagent.settings import Settings

    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 's.db'}") as store:
        writes = Runtime(store).recorder.writes
        assert (writes.window_s, writes.max_size) == (0.020, 64)  # the defaults
        given = Settings.from_env({"TOOLAGENT_COMMIT_WINDOW_MS": "5", "TOOLAGENT_COMMIT_BATCH_MAX": "16"})
        writes = Runtime(store, settings=given).recorder.writes
        assert (writes.window_s, writes.max_size) == (0.005, 16)
    with pytest.raises(UsageError, match="TOOLAGENT_COMMIT_WINDOW_MS must be a number >= 0"):
        Settings.from_env({"TOOLAGENT_COMMIT_WINDOW_MS": "-1"})


async def test_a_write_without_a_savepoint_that_fails_fails_its_batch_whose_writes_go_alone(db_url: str) -> None:
    async with probe_store(db_url) as store:
        await store.db.write(insert, 5)
        batcher = GroupCommit(store.db, window_s=3600, max_size=3)
        # 5 exists: on PostgreSQL the failed statement aborts the transaction
        results = await submit_together(batcher, (1, 5, 7), savepoint=False)
        assert isinstance(results[5], StoreError)
        assert (results[1], results[7]) == (1, 7)
        assert await rows(store) == [1, 5, 7]
        assert batcher.stats.batches == 4  # the batch, then each write alone


async def test_a_deferred_write_rides_with_the_next_batch_and_settles_without_another(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=64, idle_s=3600)
        pending = batcher.defer(insert, 1)
        assert await rows(store) == []  # queued, not written
        with anyio.fail_after(5):  # a batch never waits for more on account of a deferred write
            assert await batcher.submit(insert, 2) == 2
        assert await rows(store) == [1, 2]
        assert (batcher.stats.batches, batcher.stats.largest) == (1, 2)
        assert await batcher.settle(pending) == 1  # already committed: nothing more to do
        assert batcher.stats.batches == 1


async def test_a_deferred_write_nobody_else_takes_is_committed_by_its_settler(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=64, idle_s=3600)
        first, second = batcher.defer(insert, 1), batcher.defer(insert, 2)
        with anyio.fail_after(5):
            assert await batcher.settle(second) == 2
        assert await rows(store) == [1, 2]  # in order, in one batch
        assert await batcher.settle(first) == 1
        assert batcher.stats.batches == 1


async def test_a_deferred_write_reports_its_error_to_its_settler(db_url: str) -> None:
    async with probe_store(db_url) as store:
        await store.db.write(insert, 5)
        batcher = GroupCommit(store.db, window_s=3600, max_size=64)
        pending = batcher.defer(insert, 5)  # a primary-key violation
        assert await batcher.submit(insert, 6) == 6  # the other write still commits
        with pytest.raises(StoreError):
            await batcher.settle(pending)
        assert await rows(store) == [5, 6]


async def test_writes_waited_for_are_not_stuck_behind_deferred_ones(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=3, idle_s=3600)
        results = {}

        async def one(n: int) -> None:
            results[n] = await batcher.submit(insert, n)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(one, 1)  # leads, waiting for a full batch
                tg.start_soon(one, 2)
                await anyio.wait_all_tasks_blocked()
                deferred = [batcher.defer(insert, n) for n in (10, 11)]  # fills it, and one more is left over
                tg.start_soon(one, 3)  # queued behind a deferred write nobody settles yet
        assert results == {1: 1, 2: 2, 3: 3}
        assert await rows(store) == [1, 2, 3, 10, 11]
        assert batcher.stats.batches == 2
        assert [await batcher.settle(p) for p in deferred] == [10, 11]


async def test_a_settled_write_behind_a_full_batch_of_deferred_ones_is_in_its_settlers_batch(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=2, idle_s=3600)
        deferred = [batcher.defer(insert, n) for n in (10, 11, 12)]
        with anyio.fail_after(5):
            assert await batcher.submit(insert, 1) == 1
        assert await rows(store) == [1, 10, 11]  # the first two deferred writes, then its own
        assert [await batcher.settle(p) for p in deferred] == [10, 11, 12]
        assert await rows(store) == [1, 10, 11, 12]


async def test_writes_of_one_batch_share_a_read_and_the_next_batch_reads_again(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(store.db, window_s=3600, max_size=3)
        reads: list[int] = []

        def reading(n: int) -> Callable[[sa.Connection, int], int]:
            def write(conn: sa.Connection, n: int) -> int:
                # Each batch reads the row count once, whatever its writes inserted meanwhile.
                seen = read_once("probe rows", lambda: reads.append(n) or len(conn.execute(sa.select(PROBE.c.n)).all()))
                insert(conn, n)
                return seen

            return write

        results = await submit_together(batcher, range(6), reading, savepoint=False)
        # Outside a batch transaction, a read is made each time.
        outside = [read_once("probe rows", lambda: reads.append(-1) or 7) for _ in range(2)]
    assert (batcher.stats.batches, batcher.stats.largest) == (2, 3)
    assert sorted(results.values()) == [0, 0, 0, 3, 3, 3]  # the second batch saw the first's rows
    assert len(reads) == 4 and reads[-2:] == [-1, -1]
    assert outside == [7, 7]


@pytest.mark.parametrize("company", [None, True, False])
async def test_a_lone_write_waits_one_turn_for_company_unless_told_none_can_come(
    db_url: str, company: bool | None
) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(
            store.db, window_s=3600, max_size=64, company=None if company is None else (lambda: company)
        )
        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(batcher.submit, insert, 2)  # ready to run when the first write is submitted
                assert await batcher.submit(insert, 1) == 1
        assert await rows(store) == [1, 2]
    # Waiting a turn lets every ready task run and queue its write before the batch closes.
    assert (batcher.stats.batches, batcher.stats.largest) == ((2, 1) if company is False else (1, 2))


async def stream(batcher: GroupCommit, ns: Sequence[int], gap_s: float) -> None:
    """Submit one write per n, each from its own task, `gap_s` apart (each alone in the queue unless
    the one before waits)."""
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            for n in ns:
                tg.start_soon(batcher.submit, insert, n)
                await anyio.sleep(gap_s)


async def test_a_lone_write_waits_for_company_while_writes_come_close_together(db_url: str) -> None:
    async with probe_store(db_url) as store:
        arrivals = itertools.count()
        batcher = GroupCommit(
            store.db,
            window_s=5,
            max_size=64,
            idle_s=0.3,
            company_wait_s=1.0,
            company=lambda: True,
            crowd=lambda: True,
            clock=lambda: next(arrivals) * 0.03,
        )
        assert batcher.arrival_gap_s == float("inf")
        await stream(batcher, range(8), 0.03)
        assert await rows(store) == list(range(8))
        assert batcher.arrival_gap_s == pytest.approx(0.03)  # by the batcher's clock, not the machine's
    # The first write saw no stream yet and went alone; the later ones waited for each other.
    assert batcher.stats.batches <= 3 and batcher.stats.largest >= 4


@pytest.mark.parametrize("case", ["far apart", "no company", "no other writer"])
async def test_a_lone_write_does_not_wait_when_writes_come_far_apart_or_none_can_come(db_url: str, case: str) -> None:
    # Each write is submitted once the one before has committed, so each is alone in the queue;
    # the batcher's clock says how far apart they came, whatever the machine's speed.
    gap_s = 0.15 if case == "far apart" else 0.03
    arrivals = itertools.count()
    async with probe_store(db_url) as store:
        batcher = GroupCommit(
            store.db,
            window_s=5,
            max_size=64,
            idle_s=0.02 if case == "far apart" else 0.3,
            company_wait_s=1.0,
            # No company at all, or other tasks ready but no other writer under way (the next
            # step of a sequential run, which writes only once this write is in).
            company=lambda: case != "no company",
            crowd=lambda: case == "far apart",
            clock=lambda: next(arrivals) * gap_s,
        )
        waits: list[float] = []
        gather = batcher._gather

        async def counted(window_s: float) -> None:
            waits.append(window_s)
            await gather(window_s)

        batcher._gather = counted  # type: ignore[method-assign]
        with anyio.fail_after(20):
            for n in range(5):
                assert await batcher.submit(insert, n) == n
        assert await rows(store) == list(range(5))
    assert waits == []  # no lone write waited for company
    assert (batcher.stats.batches, batcher.stats.largest) == (5, 1)


async def test_a_lone_write_waits_for_company_no_longer_than_its_limit(db_url: str) -> None:
    async with probe_store(db_url) as store:
        batcher = GroupCommit(
            store.db, window_s=5, max_size=64, idle_s=0.3, company_wait_s=0.05, company=lambda: True, crowd=lambda: True
        )
        await stream(batcher, range(3), 0.03)  # a stream close enough to wait for
        waits: list[float] = []
        gather = batcher._gather

        async def counted(window_s: float) -> None:
            waits.append(window_s)
            await gather(window_s)

        batcher._gather = counted  # type: ignore[method-assign]
        with anyio.fail_after(5):
            assert await batcher.submit(insert, 9) == 9  # a lone write, nobody behind it
    assert waits == [0.05]  # it waited for company once, as long as the company wait: not the window
