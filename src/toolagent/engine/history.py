"""Execution history: filtered, paged, newest first, and its statistics.

Callers see their own executions; an admin may ask for everyone's (or one user's). Pages are
read in `(started_at, id)` order, descending, which every index of `executions` ends with,
so a page costs an index range read of `offset + limit` entries whatever the table's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..errors import PermissionDenied, UsageError
from ..store import engine_tables as et
from ..store.db import Database
from .executions import STATUSES, Execution
from .permissions import CATEGORIES
from .principals import Principal

#: Page size bounds and default (PRD FR-013.5).
MIN_LIMIT, MAX_LIMIT, DEFAULT_LIMIT = 1, 100, 50
#: Deeper pages are not worth reading row by row (and overflow SQLite's 64-bit OFFSET); filter instead.
MAX_OFFSET = 1_000_000_000

_T = et.executions


@dataclass(frozen=True)
class HistoryQuery:
    """Filters and paging of a history request (checked on creation)."""

    tool: str | None = None
    """Only this qualified tool."""
    category: str | None = None
    """Only this category."""
    status: str | None = None
    """Only this status: `running`, `success`, `failed` or `cancelled`."""
    since: datetime | None = None
    """Started at or after this time."""
    until: datetime | None = None
    """Started before this time."""
    limit: int = DEFAULT_LIMIT
    """Page size, 1..100."""
    offset: int = 0
    """Rows to skip, 0..MAX_OFFSET."""
    all_users: bool = False
    """Every user's executions (admins only)."""
    user: str | None = None
    """One user's executions (admins only, unless it is the caller)."""
    run_id: str | None = None
    """Only executions of this BUILD run."""

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or not MIN_LIMIT <= self.limit <= MAX_LIMIT:
            raise UsageError(f"limit must be between {MIN_LIMIT} and {MAX_LIMIT} (got {self.limit!r})")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or not 0 <= self.offset <= MAX_OFFSET:
            raise UsageError(f"offset must be between 0 and {MAX_OFFSET} (got {self.offset!r}); "
                             "narrow the query with a time range or a tool or status filter instead")
        if self.status is not None and self.status not in STATUSES:
            raise UsageError(f"unknown status {self.status!r}: use one of {', '.join(STATUSES)}")
        if self.category is not None and self.category not in CATEGORIES:
            raise UsageError(f"unknown category {self.category!r}: use one of {', '.join(CATEGORIES)}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise UsageError(f"{name} needs a time zone (e.g. 2025-01-31T00:00:00+00:00)")
        if self.since is not None and self.until is not None and self.until <= self.since:
            raise UsageError("until must be after since")


@dataclass(frozen=True)
class Stats:
    """Counts and average time of a set of executions (PRD FR-014)."""

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

    def to_json(self) -> dict[str, Any]:
        """API form (`averageExecutionTime` in milliseconds)."""
        return {"total": self.total, "success": self.success, "failed": self.failed, "cancelled": self.cancelled,
                "running": self.running, "denied": self.denied, "averageExecutionTime": self.average_ms}


@dataclass(frozen=True)
class HistoryPage:
    """One page of history and the statistics of everything the filters match."""

    executions: tuple[Execution, ...]
    """The page, newest first."""
    total_count: int
    """Rows the filters match."""
    limit: int
    """Page size asked for."""
    offset: int
    """Rows skipped."""
    stats: Stats
    """Statistics over every matching row."""

    def to_json(self) -> dict[str, Any]:
        """API form (getToolHistory)."""
        return {"executions": [e.to_json() for e in self.executions], "totalCount": self.total_count,
                "limit": self.limit, "offset": self.offset, "stats": self.stats.to_json()}


def _count(status: str) -> Any:
    return sa.func.sum(sa.case((_T.c.status == status, 1), else_=0))


#: The aggregate columns of `Stats`, in field order.
STATS_COLUMNS = (
    sa.func.count().label("total"), _count("success").label("success"), _count("failed").label("failed"),
    _count("cancelled").label("cancelled"), _count("running").label("running"),
    sa.func.sum(sa.case((_T.c.denied, 1), else_=0)).label("denied"), sa.func.avg(_T.c.duration_ms).label("average_ms"),
)


def stats_from_row(row: Any) -> Stats:
    """A `Stats` from a row of `STATS_COLUMNS`."""
    if row is None:
        return Stats()
    return Stats(int(row.total or 0), int(row.success or 0), int(row.failed or 0), int(row.cancelled or 0),
                 int(row.running or 0), int(row.denied or 0), float(row.average_ms or 0.0))


def visible_to(principal: Principal, query: HistoryQuery) -> list[Any]:
    """The WHERE conditions of `query` as `principal` may see it.

    Raises:
        PermissionDenied: a non-admin asked for everyone's or another user's executions.
    """
    where: list[Any] = []
    if query.all_users or (query.user is not None and query.user != principal.name):
        if not principal.is_admin:
            raise PermissionDenied(
                f"user '{principal.name}' ({principal.level}) may only see their own executions: admins may see everyone's"
            )
        if query.user is not None:
            where.append(_T.c.user_name == query.user)
    else:
        where.append(_T.c.user_name == principal.name)
    for column, value in ((_T.c.tool, query.tool), (_T.c.category, query.category), (_T.c.status, query.status),
                          (_T.c.run_id, query.run_id)):
        if value is not None:
            where.append(column == value)
    if query.since is not None:
        where.append(_T.c.started_at >= query.since)
    if query.until is not None:
        where.append(_T.c.started_at < query.until)
    return where


class History:
    """History pages and statistics."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def rows(self, principal: Principal, query: HistoryQuery) -> list[Execution]:
        """Just the page, newest first."""
        stmt = (sa.select(_T).where(*visible_to(principal, query))
                .order_by(_T.c.started_at.desc(), _T.c.id.desc()).limit(query.limit).offset(query.offset))
        async with self.db.begin() as conn:
            return [Execution.from_row(r) for r in await conn.execute(stmt)]

    async def stats(self, principal: Principal, query: HistoryQuery) -> Stats:
        """Statistics over every row the filters match (paging ignored).

        Without a date range or run, they are read from the execution totals (see
        `store/engine_tables.py`) plus the running rows, instead of aggregating every matching row.
        """
        where = visible_to(principal, query)
        if query.since is None and query.until is None and query.run_id is None:
            return await self._stats_from_totals(principal, query)
        stmt = sa.select(*STATS_COLUMNS).select_from(_T).where(*where)
        async with self.db.begin() as conn:
            return stats_from_row((await conn.execute(stmt)).first())

    async def stats_by_scan(self, principal: Principal, query: HistoryQuery) -> Stats:
        """`stats` computed from the rows themselves, whatever the filters."""
        stmt = sa.select(*STATS_COLUMNS).select_from(_T).where(*visible_to(principal, query))
        async with self.db.begin() as conn:
            return stats_from_row((await conn.execute(stmt)).first())

    async def _stats_from_totals(self, principal: Principal, query: HistoryQuery) -> Stats:
        tot = et.execution_totals
        own = not (query.all_users or (query.user is not None and query.user != principal.name))
        user = principal.name if own else query.user
        where: list[Any] = []
        for column, value in ((tot.c.user_name, user), (tot.c.tool, query.tool), (tot.c.category, query.category),
                              (tot.c.status, query.status)):
            if value is not None:
                where.append(column == value)
        ran = tot.c.denial == ""
        async with self.db.begin() as conn:
            rows = (await conn.execute(
                sa.select(tot.c.status, ran.label("ran"), sa.func.sum(tot.c.calls).label("calls"),
                          sa.func.sum(tot.c.timed).label("timed"), sa.func.sum(tot.c.duration_sum_ms).label("dsum"))
                .where(*where).group_by(tot.c.status, ran))).all()
            running = 0
            if query.status in (None, "running"):
                # Few rows run at once: read them by status and filter here.
                running_where = [_T.c.status == "running", *([_T.c.user_name == user] if user is not None else [])]
                running = sum(
                    1 for r in await conn.execute(sa.select(_T.c.tool, _T.c.category).where(*running_where))
                    if (query.tool is None or r.tool == query.tool) and (query.category is None or r.category == query.category)
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
        return Stats(sum(by_status.values()) + running, by_status.get("success", 0), by_status.get("failed", 0),
                     by_status.get("cancelled", 0), running, denied, dsum / timed if timed else 0.0)

    async def page(self, principal: Principal, query: HistoryQuery) -> HistoryPage:
        """The page, the total count and the statistics."""
        rows = await self.rows(principal, query)
        stats = await self.stats(principal, query)
        return HistoryPage(tuple(rows), stats.total, query.limit, query.offset, stats)


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MIN_LIMIT", "STATS_COLUMNS", "History", "HistoryPage", "HistoryQuery", "Stats",
           "stats_from_row", "visible_to"]
