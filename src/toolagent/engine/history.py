"""Execution history: filtered, paged, newest first, and its statistics.

Callers see their own executions; an admin may ask for everyone's (or one user's). The reads
themselves live in `store/history.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import PermissionDenied, UsageError
from ..model.execution import STATUSES, Execution
from ..model.permissions import CATEGORIES
from ..store.db import Database
from ..store.history import ExecutionFilter, ExecutionHistory, Stats
from .principals import Principal

#: Page size bounds and default.
MIN_LIMIT, MAX_LIMIT, DEFAULT_LIMIT = 1, 100, 50
#: Deeper pages are not worth reading row by row (and overflow SQLite's 64-bit OFFSET); filter instead.
MAX_OFFSET = 1_000_000_000


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
            raise UsageError(
                f"offset must be between 0 and {MAX_OFFSET} (got {self.offset!r}); "
                "narrow the query with a time range or a tool or status filter instead"
            )
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
        return {
            "executions": [e.to_json() for e in self.executions],
            "totalCount": self.total_count,
            "limit": self.limit,
            "offset": self.offset,
            "stats": self.stats.to_json(),
        }


def visible_to(principal: Principal, query: HistoryQuery) -> ExecutionFilter:
    """The executions of `query` that `principal` may see.

    Raises:
        PermissionDenied: a non-admin asked for everyone's or another user's executions.
    """
    user: str | None = principal.name
    if query.all_users or (query.user is not None and query.user != principal.name):
        if not principal.is_admin:
            raise PermissionDenied(
                f"user '{principal.name}' ({principal.level}) may only see their own executions: admins may see everyone's"
            )
        user = query.user
    return ExecutionFilter(
        user=user,
        tool=query.tool,
        category=query.category,
        status=query.status,
        run_id=query.run_id,
        since=query.since,
        until=query.until,
        categories=principal.categories,
    )


class History:
    """History pages and statistics."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.reads = ExecutionHistory(db)

    async def rows(self, principal: Principal, query: HistoryQuery) -> list[Execution]:
        """Just the page, newest first."""
        return await self.reads.page(visible_to(principal, query), limit=query.limit, offset=query.offset)

    async def stats(self, principal: Principal, query: HistoryQuery) -> Stats:
        """Statistics over every row the filters match (paging ignored)."""
        return await self.reads.stats(visible_to(principal, query))

    async def stats_by_scan(self, principal: Principal, query: HistoryQuery) -> Stats:
        """`stats` computed from the rows themselves, whatever the filters."""
        return await self.reads.stats_by_scan(visible_to(principal, query))

    async def page(self, principal: Principal, query: HistoryQuery) -> HistoryPage:
        """The page, the total count and the statistics."""
        rows = await self.rows(principal, query)
        stats = await self.stats(principal, query)
        return HistoryPage(tuple(rows), stats.total, query.limit, query.offset, stats)


__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "MIN_LIMIT", "History", "HistoryPage", "HistoryQuery", "visible_to"]
