"""Fixed-window limit counters (`limit_counters`), shared by every process using the store.

A counter is one row per key (`rate|user:bob`, `budget|user:bob`, ...): the window number and
the calls counted in it. Taking a unit is one conditional
`UPDATE ... SET calls = calls + 1 WHERE ... AND calls < limit RETURNING calls`, which SQLite
runs under its database write lock and PostgreSQL under the row's lock (re-checking the
condition once a concurrent writer commits): in a window the N-th call passes and the N+1-th
does not, however many tasks and processes race.

Inside a group-committed batch (`store.batch`), the first take of a counter runs that statement
and so locks the row until the commit; the batch's later takes of the same counter are counted
in memory against the value it returned, and one `UPDATE ... SET calls = calls + n` writes them
before the commit. No other transaction can change the row meanwhile, so the batch admits
exactly what its takes one statement each would, with one statement per counter instead of one
per call (a round trip each on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from . import engine_tables as et
from .batch import transaction_state
from .db import Database
from .prepared import Prepared


@dataclass(eq=False)
class _Held:
    """A counter row this batch transaction has locked: the calls counted in it, this
    transaction's takes included, and how many of those are not written yet."""

    calls: int
    unwritten: int = 0


class LimitCounters:
    """Take from and read the counters of `limit_counters`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Built once, with bound parameters (`take` runs on every tool execution).
        t, c = et.limit_counters, et.limit_counters.c
        key: sa.BindParameter[str] = sa.bindparam("b_key")
        window: sa.BindParameter[int] = sa.bindparam("b_window")
        self._bump = Prepared(
            t.update()
            .where((c.key == key) & (c.window_no == window) & (c.calls < sa.bindparam("b_limit")))
            .values(calls=c.calls + 1)
            .returning(c.calls)
        )
        # `<` rather than `!=`: a process whose clock lags must not reset a newer window.
        self._reset = Prepared(
            t.update()
            .where((c.key == key) & (c.window_no < window))
            .values(window_no=window, calls=1)
            .returning(c.calls)
        )
        self._give_back = Prepared(
            t.update().where((c.key == key) & (c.window_no == window) & (c.calls > 0)).values(calls=c.calls - 1)
        )
        self._add = Prepared(
            t.update().where((c.key == key) & (c.window_no == window)).values(calls=c.calls + sa.bindparam("b_calls"))
        )
        insert_fn = sqlite.insert if db.is_sqlite else postgresql.insert
        self._create = Prepared(
            insert_fn(t)
            .values(key=key, window_no=window, calls=1)
            .on_conflict_do_nothing(index_elements=[c.key])
            .returning(c.calls)
        )

    def take_in(self, conn: sa.Connection, key: str, window_no: int, limit: int) -> int | None:
        """One unit from counter `key` in window `window_no`, inside `conn`'s transaction.

        Returns:
            The calls counted in the window now, or None when `limit` were counted already.
        """
        state = transaction_state()
        if state is None:
            return self._take(conn, key, window_no, limit)
        held: _Held | None = state.values.get((_Held, key, window_no))
        if held is None:
            calls = self._take(conn, key, window_no, limit)
            if calls is not None:  # the row is this transaction's until it commits
                fresh = state.values[(_Held, key, window_no)] = _Held(calls)
                state.before_commit(lambda conn: self._write_held(conn, key, window_no, fresh))
            return calls
        if held.calls >= limit:
            return None
        held.calls += 1
        held.unwritten += 1
        return held.calls

    def _write_held(self, conn: sa.Connection, key: str, window_no: int, held: _Held) -> None:
        if held.unwritten:
            self._add.execute(conn, {"b_key": key, "b_window": window_no, "b_calls": held.unwritten})
            held.unwritten = 0

    def _take(self, conn: sa.Connection, key: str, window_no: int, limit: int) -> int | None:
        params = {"b_key": key, "b_window": window_no, "b_limit": limit}
        row = self._bump.execute(conn, params).first()
        if row is not None:
            return int(row.calls)
        # No row for this window: an older window's row starts over, else the first row is made.
        if self._reset.execute(conn, params).first() is not None:
            return 1
        if self._create.execute(conn, params).first() is not None:
            return 1
        # Another transaction made or reset the row meanwhile: count against it.
        row = self._bump.execute(conn, params).first()
        return int(row.calls) if row is not None else None

    def give_back_in(self, conn: sa.Connection, key: str, window_no: int) -> None:
        """Undo one `take_in` of counter `key` in window `window_no` made in `conn`'s transaction (the
        transaction holds the row's lock since: no other writer has seen the unit)."""
        state = transaction_state()
        held = None if state is None else state.values.get((_Held, key, window_no))
        if held is not None:
            held.calls -= 1
            held.unwritten -= 1
            return
        self._give_back.execute(conn, {"b_key": key, "b_window": window_no})

    async def read(self, keys: Sequence[str]) -> dict[str, tuple[int, int]]:
        """Each existing counter of `keys`: its window number and the calls counted in it."""
        c = et.limit_counters.c
        async with self.db.begin() as conn:
            rows = await conn.execute(sa.select(c.key, c.window_no, c.calls).where(c.key.in_(list(keys))))
            return {r.key: (int(r.window_no), int(r.calls)) for r in rows}
