"""Limit counters inside group-committed batches: the batch's first take of a counter runs its
statement (locking the row), the rest are counted in memory and written once before the commit,
and the counts are exactly what one statement per take would give — on both stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
import sqlalchemy as sa

from toolagent.errors import StoreError
from toolagent.store import engine_tables as et
from toolagent.store import open_store
from toolagent.store.batch import GroupCommit
from toolagent.store.limits import LimitCounters

pytestmark = pytest.mark.anyio

WINDOW = 7


async def _together(batcher: GroupCommit, writes: list[tuple[Callable[..., Any], bool]]) -> list[Any]:
    """Submit the writes at once, in order (each with its savepoint flag); their answers or errors."""
    results: list[Any] = [None] * len(writes)

    async def one(i: int, fn: Callable[..., Any], savepoint: bool) -> None:
        try:
            results[i] = await batcher.submit(fn, savepoint=savepoint)
        except StoreError as exc:
            results[i] = exc

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for i, (fn, savepoint) in enumerate(writes):
                tg.start_soon(one, i, fn, savepoint)
    return results


async def _stored(store: Any, key: str) -> tuple[int, int] | None:
    return (await LimitCounters(store.db).read([key])).get(key)


async def test_a_batch_takes_exactly_its_limit_with_one_statement_per_counter(db_url: str) -> None:
    async with open_store(db_url) as store:
        counters = LimitCounters(store.db)
        statements: list[str] = []
        take = counters._take

        def counted(conn: sa.Connection, key: str, window_no: int, limit: int) -> int | None:
            statements.append(key)
            return take(conn, key, window_no, limit)

        counters._take = counted  # type: ignore[method-assign]
        batcher = GroupCommit(store.db, window_s=3600, max_size=6)
        taking = (lambda conn: counters.take_in(conn, "rate|user:ana", WINDOW, 3), False)
        first = await _together(batcher, [taking] * 6)
        # The next batch finds the row full as written: nothing is held across transactions.
        second = await _together(batcher, [taking] * 2)
        stored = await _stored(store, "rate|user:ana")
    assert batcher.stats.largest == 6
    assert first == [1, 2, 3, None, None, None] and second == [None, None]
    assert stored == (WINDOW, 3)
    # One statement took the first unit and locked the row; a refusal in memory costs none; the
    # second batch finds the counter full with one statement per take.
    assert statements == ["rate|user:ana"] + ["rate|user:ana"] * 2


async def test_units_given_back_in_a_batch_are_not_written(db_url: str) -> None:
    async with open_store(db_url) as store:
        counters = LimitCounters(store.db)
        batcher = GroupCommit(store.db, window_s=3600, max_size=4)

        def take_then_give_back(conn: sa.Connection) -> int | None:
            used = counters.take_in(conn, "rate|user:bo", WINDOW, 10)
            counters.give_back_in(conn, "rate|user:bo", WINDOW)  # a later counter of the call refused
            return used

        taking = (lambda conn: counters.take_in(conn, "rate|user:bo", WINDOW, 10), False)
        results = await _together(batcher, [taking, (take_then_give_back, False), taking, (take_then_give_back, False)])
        stored = await _stored(store, "rate|user:bo")
    assert results == [1, 2, 2, 3]
    assert stored == (WINDOW, 2)


async def test_a_write_rolled_back_to_its_savepoint_undoes_only_its_own_take(db_url: str) -> None:
    async with open_store(db_url) as store:
        counters = LimitCounters(store.db)
        batcher = GroupCommit(store.db, window_s=3600, max_size=5)

        def take_then_fail(conn: sa.Connection) -> None:
            counters.take_in(conn, "rate|user:cy", WINDOW, 10)
            conn.execute(sa.text("SELECT * FROM no_such_table"))  # fails inside its savepoint

        taking = (lambda conn: counters.take_in(conn, "rate|user:cy", WINDOW, 10), False)
        results = await _together(batcher, [taking, taking, (take_then_fail, True), taking, taking])
        stored = await _stored(store, "rate|user:cy")
        async with store.db.begin() as conn:
            rows = (await conn.execute(sa.select(sa.func.count()).select_from(et.limit_counters))).scalar()
    assert batcher.stats.largest == 5 and batcher.stats.batches == 1
    assert results[:2] == [1, 2] and isinstance(results[2], StoreError) and results[3:] == [3, 4]
    assert stored == (WINDOW, 4) and rows == 1
