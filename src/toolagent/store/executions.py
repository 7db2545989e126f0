"""The store verbs over execution records (the record itself is `model/execution.py`), and
the owner identity used to close orphans.

An execution row is written `running` before the tool is called and updated exactly once when
it ends (`success`, `failed` or `cancelled`); the update only applies to a row still running,
so a late writer never overwrites an earlier outcome. A call the gate refused is recorded as
`failed` with `denied` set, its reason and no duration: it never reached a server. Every write
of a final state also counts the execution into `execution_totals` / `execution_buckets` in the
same transaction (and `prune` takes pruned rows out again), which is what metrics read.

Each running row names its owner: process id, host name and the kernel's boot id. When an
engine starts it closes, as `failed` with reason `interrupted`, the rows whose owner is
certainly gone: a process on this host (same boot) that no longer exists, any process of an
earlier boot of this host, and — on any host — a row older than its timeout plus a grace
period, since no execution outlives its timeout. Rows of live processes, and recent rows of
other hosts, are left alone: only their own host can tell whether they still run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..model.execution import (
    BOUNDS_MS,
    FINAL_STATUSES,
    INTERRUPTED,
    MAX_TIMEOUT_MS,
    ORPHAN_GRACE_S,
    Execution,
    bucket_index,
    final_values,
    row_values,
)
from ..model.owner import Owner, boot_id, gone, pid_alive
from ..model.status import ExecutionStatus
from ..model.times import as_utc
from . import engine_tables as et
from .db import Database, utcnow
from .prepared import Prepared

_T = et.executions
#: Who cancelled a run (read at every admission of one of its calls; built once).
_RUN_CANCELLED_BY = Prepared(
    sa.select(et.run_cancellations.c.requested_by).where(et.run_cancellations.c.run_id == sa.bindparam("b_run_id"))
)
_TOT = et.execution_totals
_BKT = et.execution_buckets


def _bucket_sql(column: Any) -> Any:
    return sa.case(*((column <= bound, i) for i, bound in enumerate(BOUNDS_MS)), else_=len(BOUNDS_MS))


_CANCEL_REQUESTS = sa.select(_T.c.id, _T.c.cancel_requested_by).where(
    _T.c.id.in_(sa.bindparam("ids", expanding=True))
    & _T.c.cancel_requested_by.is_not(None)
    & (_T.c.status == ExecutionStatus.RUNNING)
)


def _cancel_requests_in(conn: sa.Connection, ids: list[str]) -> dict[str, str]:
    return {r.id: r.cancel_requested_by for r in conn.execute(_CANCEL_REQUESTS, {"ids": ids})}


@dataclass(frozen=True)
class _Ended:
    """What the totals need of an execution that ended."""

    tool: str
    user: str
    status: str
    denial: str
    category: str
    duration_ms: float | None
    started_at: datetime

    @classmethod
    def of(cls, e: Execution) -> _Ended:
        return cls(e.tool, e.user, e.status, e.denial or "", e.category, e.duration_ms, e.started_at)


class ExecutionStore:
    """The engine's verbs over `executions`, its totals and `run_cancellations`."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Built once: these run with every execution.
        self._insert_row = Prepared(_T.insert())
        self._finish_row = Prepared(
            _T.update().where((_T.c.id == sa.bindparam("k_id")) & (_T.c.status == ExecutionStatus.RUNNING))
        )
        insert = sqlite.insert if db.is_sqlite else postgresql.insert
        ins = insert(_TOT)
        x = ins.excluded
        self._upsert_totals = Prepared(
            ins.on_conflict_do_update(
                index_elements=[_TOT.c.tool, _TOT.c.user_name, _TOT.c.status, _TOT.c.denial],
                set_={
                    "calls": _TOT.c.calls + x.calls,
                    "timed": _TOT.c.timed + x.timed,
                    "duration_sum_ms": _TOT.c.duration_sum_ms + x.duration_sum_ms,
                    "category": x.category,
                    "last_started_at": sa.case(
                        (
                            _TOT.c.last_started_at.is_(None) | (x.last_started_at > _TOT.c.last_started_at),
                            x.last_started_at,
                        ),
                        else_=_TOT.c.last_started_at,
                    ),
                },
            )
        )
        bins = insert(_BKT)
        self._upsert_buckets = Prepared(
            bins.on_conflict_do_update(
                index_elements=[_BKT.c.tool, _BKT.c.bucket], set_={"calls": _BKT.c.calls + bins.excluded.calls}
            )
        )

    def _add_totals(self, conn: sa.Connection, ended: Sequence[_Ended]) -> None:
        """Count executions that ended into `execution_totals` and `execution_buckets` (same transaction)."""
        totals: dict[tuple[str, str, str, str], list[Any]] = {}
        buckets: dict[tuple[str, int], int] = {}
        for e in ended:
            slot = totals.setdefault((e.tool, e.user, e.status, e.denial), [e.category, 0, 0, 0.0, e.started_at])
            slot[1] += 1
            if e.duration_ms is not None:
                slot[2] += 1
                slot[3] += e.duration_ms
                key = (e.tool, bucket_index(e.duration_ms))
                buckets[key] = buckets.get(key, 0) + 1
            slot[4] = max(slot[4], e.started_at)
        # Sorted, so concurrent writers lock rows in one order.
        rows = [
            {
                "tool": k[0],
                "user_name": k[1],
                "status": k[2],
                "denial": k[3],
                "category": v[0],
                "calls": v[1],
                "timed": v[2],
                "duration_sum_ms": v[3],
                "last_started_at": v[4],
            }
            for k, v in sorted(totals.items())
        ]
        bins = [{"tool": k[0], "bucket": k[1], "calls": n} for k, n in sorted(buckets.items())]
        for stmt, params in ((self._upsert_totals, rows), (self._upsert_buckets, bins)):
            if params:
                stmt.execute(conn, params[0] if len(params) == 1 else params)

    def insert(self, conn: sa.Connection, execution: Execution) -> None:
        """Insert a record inside the caller's transaction (a final one is counted in the totals)."""
        self._insert_row.execute(conn, row_values(execution))
        if execution.status in FINAL_STATUSES:
            self._add_totals(conn, [_Ended.of(execution)])

    def insert_many_in(self, conn: sa.Connection, executions: Sequence[Execution]) -> None:
        """Insert records in one statement inside the caller's transaction; the totals are the
        caller's (`add_totals_in`), so a batch counts all of its ended calls at once."""
        if executions:
            rows = [row_values(e) for e in executions]
            self._insert_row.execute(conn, rows[0] if len(rows) == 1 else rows)

    def add_totals_in(self, conn: sa.Connection, executions: Sequence[Execution]) -> None:
        """Count ended executions into the totals inside the caller's transaction (their rows
        locked in one sorted order, so concurrent batches never deadlock on them)."""
        if executions:
            self._add_totals(conn, [_Ended.of(e) for e in executions])

    async def record(self, execution: Execution) -> None:
        """Insert a record in a transaction of its own."""
        await self.db.write(self.insert, execution)

    def finish_in(self, conn: sa.Connection, execution: Execution) -> bool:
        """`finish` inside the caller's transaction."""
        return self._end_in(conn, execution.id, final_values(execution), _Ended.of(execution))

    def finish_many_in(self, conn: sa.Connection, executions: Sequence[Execution]) -> set[str]:
        """`finish_in` of several inside the caller's transaction (one round trip on PostgreSQL),
        without counting the totals (the caller counts those it gets back, `add_totals_in`).

        Returns:
            The ids of the rows that were still running, now final.
        """
        counts = self._finish_row.execute_each(conn, [{"k_id": e.id, **final_values(e)} for e in executions])
        return {e.id for e, n in zip(executions, counts, strict=True) if n}

    def _end_in(self, conn: sa.Connection, execution_id: str, values: dict[str, Any], ended: _Ended) -> bool:
        """Set a final state if the row is still running, and count it in the totals; False otherwise."""
        result = self._finish_row.execute(conn, {"k_id": execution_id, **values})
        if result.rowcount:
            self._add_totals(conn, [ended])
        return bool(result.rowcount)

    async def finish(self, execution: Execution) -> bool:
        """Write a final state, if the row is still running; False when another outcome came first."""
        return await self.db.write(self.finish_in, execution)

    async def get(self, execution_id: str) -> Execution | None:
        """One record, or None."""
        async with self.db.begin() as conn:
            row = (await conn.execute(sa.select(_T).where(_T.c.id == execution_id))).first()
        return Execution.from_row(row) if row is not None else None

    async def running(
        self, *, user: str | None = None, run_id: str | None = None, categories: Collection[str] | None = None
    ) -> list[Execution]:
        """Running records (of one user, of one run, of these categories), oldest first."""
        query = sa.select(_T).where(_T.c.status == ExecutionStatus.RUNNING).order_by(_T.c.started_at, _T.c.id)
        if categories is not None:
            query = query.where(_T.c.category.in_(sorted(categories)))
        if user is not None:
            query = query.where(_T.c.user_name == user)
        if run_id is not None:
            query = query.where(_T.c.run_id == run_id)
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        executions = [Execution.from_row(r) for r in rows]
        if await self.close_orphans(executions):
            return await self.running(user=user, run_id=run_id, categories=categories)
        return executions

    async def run_categories(self, run_id: str, *, user: str | None = None) -> set[str]:
        """The categories of the tools a run's recorded steps used (of one user's steps)."""
        query = sa.select(_T.c.category).where(_T.c.run_id == run_id).distinct()
        if user is not None:
            query = query.where(_T.c.user_name == user)
        async with self.db.begin() as conn:
            return {r.category for r in await conn.execute(query)}

    async def count_running(self) -> int:
        """Running executions in every process."""
        async with self.db.begin() as conn:
            return int(
                await conn.scalar(
                    sa.select(sa.func.count()).select_from(_T).where(_T.c.status == ExecutionStatus.RUNNING)
                )
                or 0
            )

    async def cancel_requests(self, ids: Iterable[str]) -> dict[str, str]:
        """Of `ids`, those another process asked to cancel, with who asked.

        Polled about ten times a second while calls run (`tools/cancellation.py`), with every
        running call's id: one statement built once, run as a hot read (inline on SQLite).
        """
        wanted = list(ids)
        if not wanted:
            return {}
        return await self.db.read(_cancel_requests_in, wanted)

    async def request_cancel(self, execution_id: str, by: str, now: datetime) -> bool:
        """Flag a running record for cancellation by its owning process; False if it is not running."""
        async with self.db.begin() as conn:
            result = await conn.execute(
                _T.update()
                .where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.RUNNING))
                .values(cancel_requested_by=by, cancel_requested_at=now)
            )
        return bool(result.rowcount)

    async def request_run_cancel(self, run_id: str, by: str, now: datetime, *, user: str | None = None) -> list[str]:
        """Mark a run cancelled (its later steps end cancelled at once) and flag its running records.

        Args:
            run_id: The run.
            by: Who asks.
            now: When.
            user: Only a run this user has executions in, and only their records (None: any run — for admins).

        Returns:
            The ids of the running records flagged.
        """
        where = (_T.c.run_id == run_id) & (_T.c.status == ExecutionStatus.RUNNING)
        if user is not None:
            where &= _T.c.user_name == user
        rc = et.run_cancellations
        async with self.db.begin() as conn:
            if user is not None:
                mine = await conn.scalar(
                    sa.select(_T.c.id).where((_T.c.run_id == run_id) & (_T.c.user_name == user)).limit(1)
                )
                if mine is None:
                    return []  # not this user's run: nothing to flag, and its later steps are not theirs to stop
            ids = [
                r.id
                for r in await conn.execute(
                    _T.update().where(where).values(cancel_requested_by=by, cancel_requested_at=now).returning(_T.c.id)
                )
            ]
            exists = await conn.scalar(sa.select(rc.c.run_id).where(rc.c.run_id == run_id))
            if exists is None:
                await conn.execute(rc.insert().values(run_id=run_id, requested_by=by, requested_at=now))
        return ids

    def run_cancelled_by(self, conn: sa.Connection, run_id: str) -> str | None:
        """Who cancelled `run_id`, if anyone (inside the caller's transaction)."""
        by: str | None = _RUN_CANCELLED_BY.execute(conn, {"b_run_id": run_id}).scalar()
        return by

    async def close_orphans(self, executions: Iterable[Execution]) -> bool:
        """Close the running ones among `executions` whose process is certainly gone; whether any was.

        A long-lived reader (the API server) would otherwise list a killed process's call as
        running until an engine starts on the store again.
        """
        # Only a process certainly gone: the age rule (past its timeout) is left to the sweep when
        # an engine starts, which reads the age on that engine's own clock.
        me, now = Owner.current(), utcnow()
        ids = [
            e.id
            for e in executions
            if e.status == ExecutionStatus.RUNNING
            and e.owner is not None
            and gone(e.owner.pid, e.owner.host, e.owner.boot, me) is not None
        ]
        return bool(ids) and bool(await self.close_interrupted(me, now, ids=ids))

    async def close_interrupted(
        self, me: Owner, now: datetime, *, run_id: str | None = None, ids: Collection[str] | None = None
    ) -> list[str]:
        """Close as `failed` / `interrupted` the running rows whose process is certainly gone (module
        docstring): every such row, or only those of the run `run_id`, or only `ids`."""
        query = sa.select(
            _T.c.id,
            _T.c.tool,
            _T.c.user_name,
            _T.c.category,
            _T.c.started_at,
            _T.c.timeout_ms,
            _T.c.owner_pid,
            _T.c.owner_host,
            _T.c.owner_boot,
        ).where(_T.c.status == ExecutionStatus.RUNNING)
        if run_id is not None:
            query = query.where(_T.c.run_id == run_id)
        if ids is not None:
            query = query.where(_T.c.id.in_(sorted(ids)))
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        closed: list[str] = []
        for row in rows:
            started = as_utc(row.started_at)
            assert started is not None
            why = _orphaned(row, me, now, started)
            if why is None:
                continue
            duration_ms = max(0.0, (now - started).total_seconds() * 1000)
            values = {
                "status": ExecutionStatus.FAILED,
                "ended_at": now,
                "reason": INTERRUPTED,
                "error": f"{INTERRUPTED}: {why}",
                "duration_ms": duration_ms,
            }
            ended = _Ended(row.tool, row.user_name, ExecutionStatus.FAILED, "", row.category, duration_ms, started)
            if await self.db.write(self._end_in, row.id, values, ended):
                closed.append(row.id)
        return closed

    async def prune(self, before: datetime) -> int:
        """Delete finished records that ended before `before` (and take them out of the totals);
        returns how many."""
        rc = et.run_cancellations
        old = _T.c.status.in_(sorted(FINAL_STATUSES)) & (_T.c.ended_at < before)
        denial = sa.func.coalesce(_T.c.denial, "")
        async with self.db.begin() as conn:
            gone = (
                await conn.execute(
                    sa.select(
                        _T.c.tool,
                        _T.c.user_name,
                        _T.c.status,
                        denial.label("denial"),
                        sa.func.count().label("calls"),
                        sa.func.count(_T.c.duration_ms).label("timed"),
                        sa.func.coalesce(sa.func.sum(_T.c.duration_ms), 0.0).label("dsum"),
                    )
                    .where(old)
                    .group_by(_T.c.tool, _T.c.user_name, _T.c.status, denial)
                    .order_by(_T.c.tool, _T.c.user_name, _T.c.status, denial)
                )
            ).all()
            bucket = _bucket_sql(_T.c.duration_ms)
            bins = (
                await conn.execute(
                    sa.select(_T.c.tool, bucket.label("bucket"), sa.func.count().label("calls"))
                    .where(old & _T.c.duration_ms.is_not(None))
                    .group_by(_T.c.tool, bucket)
                    .order_by(_T.c.tool, bucket)
                )
            ).all()
            result = await conn.execute(_T.delete().where(old))
            if gone:
                key = (
                    (_TOT.c.tool == sa.bindparam("k_tool"))
                    & (_TOT.c.user_name == sa.bindparam("k_user"))
                    & (_TOT.c.status == sa.bindparam("k_status"))
                    & (_TOT.c.denial == sa.bindparam("k_denial"))
                )
                await conn.execute(
                    _TOT.update()
                    .where(key)
                    .values(
                        calls=_TOT.c.calls - sa.bindparam("n_calls"),
                        timed=_TOT.c.timed - sa.bindparam("n_timed"),
                        duration_sum_ms=_TOT.c.duration_sum_ms - sa.bindparam("n_dsum"),
                    ),
                    [
                        {
                            "k_tool": g.tool,
                            "k_user": g.user_name,
                            "k_status": g.status,
                            "k_denial": g.denial,
                            "n_calls": g.calls,
                            "n_timed": g.timed,
                            "n_dsum": float(g.dsum),
                        }
                        for g in gone
                    ],
                )
                await conn.execute(_TOT.delete().where(_TOT.c.calls <= 0))
            if bins:
                await conn.execute(
                    _BKT.update()
                    .where((_BKT.c.tool == sa.bindparam("k_tool")) & (_BKT.c.bucket == sa.bindparam("k_bucket")))
                    .values(calls=_BKT.c.calls - sa.bindparam("n_calls")),
                    [{"k_tool": b.tool, "k_bucket": b.bucket, "n_calls": b.calls} for b in bins],
                )
                await conn.execute(_BKT.delete().where(_BKT.c.calls <= 0))
            await conn.execute(rc.delete().where(rc.c.requested_at < before))
        return int(result.rowcount or 0)

    async def rebuild_totals(self) -> None:
        """Recount `execution_totals` and `execution_buckets` from the `executions` rows (after a bulk load)."""
        denial = sa.func.coalesce(_T.c.denial, "")
        bucket = _bucket_sql(_T.c.duration_ms)
        ended = _T.c.status.in_(sorted(FINAL_STATUSES))
        async with self.db.begin() as conn:
            await conn.execute(_TOT.delete())
            await conn.execute(_BKT.delete())
            await conn.execute(
                _TOT.insert().from_select(
                    [
                        "tool",
                        "user_name",
                        "status",
                        "denial",
                        "category",
                        "calls",
                        "timed",
                        "duration_sum_ms",
                        "last_started_at",
                    ],
                    sa.select(
                        _T.c.tool,
                        _T.c.user_name,
                        _T.c.status,
                        denial,
                        sa.func.max(_T.c.category),
                        sa.func.count(),
                        sa.func.count(_T.c.duration_ms),
                        sa.func.coalesce(sa.func.sum(_T.c.duration_ms), 0.0),
                        sa.func.max(_T.c.started_at),
                    )
                    .where(ended)
                    .group_by(_T.c.tool, _T.c.user_name, _T.c.status, denial),
                )
            )
            await conn.execute(
                _BKT.insert().from_select(
                    ["tool", "bucket", "calls"],
                    sa.select(_T.c.tool, bucket, sa.func.count())
                    .where(ended & _T.c.duration_ms.is_not(None))
                    .group_by(_T.c.tool, bucket),
                )
            )


@dataclass(frozen=True)
class _OwnedRow:
    """What `_orphaned` reads of a row, from an `Execution`."""

    owner: Owner
    timeout_ms: int | None

    @property
    def owner_pid(self) -> int:
        return self.owner.pid

    @property
    def owner_host(self) -> str:
        return self.owner.host

    @property
    def owner_boot(self) -> str:
        return self.owner.boot


def _orphaned(row: Any, me: Owner, now: datetime, started: datetime) -> str | None:
    limit_ms = (row.timeout_ms or MAX_TIMEOUT_MS) + ORPHAN_GRACE_S * 1000
    if now - started > timedelta(milliseconds=limit_ms):
        return f"still running {round((now - started).total_seconds())} s after it started, past its timeout"
    return gone(row.owner_pid, row.owner_host, row.owner_boot, me)


__all__ = ["ExecutionStore", "Owner", "boot_id", "pid_alive"]
