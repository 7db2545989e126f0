"""Execution history reads: pages newest first, and statistics over everything a filter matches.

Pages are read in `(started_at, id)` order, descending, which every history index of
`executions` holds right after its filter's columns, so a page costs an index range read of
`offset + limit` entries whatever the table's size. Those indexes hold ended executions only
(`store/engine_tables.py`): a read that may match executions in flight reads the ended ones and
the live ones (few, through the status index) in two parts and merges them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..model.execution import Execution
from ..model.status import ExecutionStatus
from . import engine_tables as et
from .db import Database
from .executions import ExecutionStore

_T = et.executions


@dataclass(frozen=True)
class Stats:
    """Counts and average time of a set of executions."""

    total: int = 0
    """Executions (denied ones included)."""
    success: int = 0
    """Ended successfully."""
    failed: int = 0
    """Ended failed (denied ones included)."""
    cancelled: int = 0
    """Cancelled, timeouts included."""
    running: int = 0
    """Still running."""
    denied: int = 0
    """Refused by the gate (counted in `failed` too)."""
    average_ms: float = 0.0
    """Average duration of the executions that ran and ended."""
    timed: int = 0
    """How many executions `average_ms` is over."""

    def __add__(self, other: Stats) -> Stats:
        """The statistics of two disjoint sets of executions together."""
        timed = self.timed + other.timed
        average = (self.average_ms * self.timed + other.average_ms * other.timed) / timed if timed else 0.0
        return Stats(
            self.total + other.total,
            self.success + other.success,
            self.failed + other.failed,
            self.cancelled + other.cancelled,
            self.running + other.running,
            self.denied + other.denied,
            average,
            timed,
        )

    def to_json(self) -> dict[str, Any]:
        """API form (`averageExecutionTimeMs` in milliseconds; `averageExecutionTime`, the same, is deprecated)."""
        return {
            "total": self.total,
            "success": self.success,
            "failed": self.failed,
            "cancelled": self.cancelled,
            "running": self.running,
            "denied": self.denied,
            "averageExecutionTime": self.average_ms,
            "averageExecutionTimeMs": self.average_ms,
        }


@dataclass(frozen=True)
class ExecutionFilter:
    """Which executions a read covers (every field None: all of them)."""

    user: str | None = None
    """One user's executions."""
    tool: str | None = None
    """One qualified tool."""
    category: str | None = None
    """One category."""
    status: str | None = None
    """One status."""
    run_id: str | None = None
    """One BUILD run."""
    since: datetime | None = None
    """Started at or after this time."""
    until: datetime | None = None
    """Started before this time."""
    categories: frozenset[str] | None = None
    """Only these categories (the caller's API key scopes); None: every category."""

    def conditions(self) -> list[Any]:
        """The WHERE conditions over `executions`."""
        where: list[Any] = []
        for column, value in (
            (_T.c.user_name, self.user),
            (_T.c.tool, self.tool),
            (_T.c.category, self.category),
            (_T.c.status, self.status),
            (_T.c.run_id, self.run_id),
        ):
            if value is not None:
                where.append(column == value)
        if self.categories is not None:
            where.append(_T.c.category.in_(sorted(self.categories)))
        if self.since is not None:
            where.append(_T.c.started_at >= self.since)
        if self.until is not None:
            where.append(_T.c.started_at < self.until)
        return where

    def parts(self) -> list[list[Any]]:
        """The WHERE conditions of each part a read over `executions` takes, so that each part has
        an index: one part when the filter names a run (its own index) or a status (the status
        index for a live one; the history indexes, which need `ENDED` stated, for an ended one),
        else the ended executions and the live ones."""
        where = self.conditions()
        if self.run_id is not None or self.status in et.LIVE_STATUSES:
            return [where]
        if self.status is not None:
            return [[*where, et.ENDED]]
        return [[*where, et.ENDED], [*where, et.LIVE]]


def _count(status: str) -> Any:
    return sa.func.sum(sa.case((_T.c.status == status, 1), else_=0))


#: The aggregate columns of `Stats`, in field order.
STATS_COLUMNS = (
    sa.func.count().label("total"),
    _count(ExecutionStatus.SUCCESS).label("success"),
    _count(ExecutionStatus.FAILED).label("failed"),
    _count(ExecutionStatus.CANCELLED).label("cancelled"),
    _count(ExecutionStatus.RUNNING).label("running"),
    sa.func.sum(sa.case((_T.c.denied, 1), else_=0)).label("denied"),
    sa.func.avg(_T.c.duration_ms).label("average_ms"),
    sa.func.count(_T.c.duration_ms).label("timed"),
)


def stats_from_row(row: Any) -> Stats:
    """A `Stats` from a row of `STATS_COLUMNS`."""
    if row is None:
        return Stats()
    return Stats(
        int(row.total or 0),
        int(row.success or 0),
        int(row.failed or 0),
        int(row.cancelled or 0),
        int(row.running or 0),
        int(row.denied or 0),
        float(row.average_ms or 0.0),
        int(row.timed or 0),
    )


class ExecutionHistory:
    """History pages and statistics over `executions` and its totals."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def page(self, where: ExecutionFilter, *, limit: int, offset: int) -> list[Execution]:
        """One page of the matching executions, newest first."""
        newest_first = (_T.c.started_at.desc(), _T.c.id.desc())
        parts = where.parts()
        if len(parts) == 1:
            stmt = sa.select(_T).where(*parts[0]).order_by(*newest_first).limit(limit).offset(offset)
        else:
            # Each part's first `offset + limit` rows hold the page's rows. The parts are merged by
            # their keys alone (read from the indexes), and only the page's rows are fetched.
            keys = sa.union_all(
                *(
                    sa.select(
                        sa.select(_T.c.started_at, _T.c.id)
                        .where(*part)
                        .order_by(*newest_first)
                        .limit(offset + limit)
                        .subquery()
                    )
                    for part in parts
                )
            ).subquery()
            page = sa.select(keys.c.id).order_by(keys.c.started_at.desc(), keys.c.id.desc()).limit(limit).offset(offset)
            stmt = sa.select(_T).where(_T.c.id.in_(page.scalar_subquery())).order_by(*newest_first)
        async with self.db.begin() as conn:
            executions = [Execution.from_row(r) for r in await conn.execute(stmt)]
        # A running row of a killed process is closed before it is shown (as in the active list).
        if any(e.status == ExecutionStatus.RUNNING for e in executions):
            if await ExecutionStore(self.db).close_orphans(executions):
                return await self.page(where, limit=limit, offset=offset)
        return executions

    async def stats(self, where: ExecutionFilter) -> Stats:
        """Statistics over every matching execution.

        Without a date range or run, they are read from the execution totals (see
        `store/engine_tables.py`) plus the running rows, instead of aggregating every matching row.
        """
        if where.since is None and where.until is None and where.run_id is None:
            return await self._stats_from_totals(where)
        return await self.stats_by_scan(where)

    async def stats_by_scan(self, where: ExecutionFilter) -> Stats:
        """`stats` computed from the rows themselves, whatever the filter."""
        async with self.db.begin() as conn:
            parts = [
                stats_from_row((await conn.execute(sa.select(*STATS_COLUMNS).select_from(_T).where(*part))).one())
                for part in where.parts()
            ]
        return sum(parts[1:], parts[0])

    async def _stats_from_totals(self, where: ExecutionFilter) -> Stats:
        tot = et.execution_totals
        conditions: list[Any] = []
        for column, value in (
            (tot.c.user_name, where.user),
            (tot.c.tool, where.tool),
            (tot.c.category, where.category),
            (tot.c.status, where.status),
        ):
            if value is not None:
                conditions.append(column == value)
        if where.categories is not None:
            conditions.append(tot.c.category.in_(sorted(where.categories)))
        ran = tot.c.denial == ""
        async with self.db.begin() as conn:
            rows = (
                await conn.execute(
                    sa.select(
                        tot.c.status,
                        ran.label("ran"),
                        sa.func.sum(tot.c.calls).label("calls"),
                        sa.func.sum(tot.c.timed).label("timed"),
                        sa.func.sum(tot.c.duration_sum_ms).label("dsum"),
                    )
                    .where(*conditions)
                    .group_by(tot.c.status, ran)
                )
            ).all()
            running = 0
            if where.status in (None, ExecutionStatus.RUNNING):
                # Few rows run at once: read them by status and filter here.
                running_where = [
                    _T.c.status == ExecutionStatus.RUNNING,
                    *([_T.c.user_name == where.user] if where.user is not None else []),
                ]
                running = sum(
                    1
                    for r in await conn.execute(sa.select(_T.c.tool, _T.c.category).where(*running_where))
                    if (where.tool is None or r.tool == where.tool)
                    and (where.category is None or r.category == where.category)
                    and (where.categories is None or r.category in where.categories)
                )
        by_status: dict[str, int] = {}
        denied = timed = 0
        dsum = 0.0
        for r in rows:
            by_status[r.status] = by_status.get(r.status, 0) + int(r.calls)
            if r.ran:
                timed += int(r.timed)
                dsum += float(r.dsum)
            else:
                denied += int(r.calls)
        return Stats(
            sum(by_status.values()) + running,
            by_status.get(ExecutionStatus.SUCCESS, 0),
            by_status.get(ExecutionStatus.FAILED, 0),
            by_status.get(ExecutionStatus.CANCELLED, 0),
            running,
            denied,
            dsum / timed if timed else 0.0,
            timed,
        )


__all__ = ["STATS_COLUMNS", "ExecutionFilter", "ExecutionHistory", "Stats", "stats_from_row"]
