"""The reads behind metrics: execution totals, duration buckets, running rows and percentiles.

Counts, sums and duration buckets come from `execution_totals` / `execution_buckets`, which are
updated in the transaction that ends each execution (so a snapshot reads a few hundred rows, not
the history); running executions are read from `executions`. Percentiles are nearest-rank over
the durations of the executions that ran and ended, each one index read
(`ix_executions_tool_duration`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..model.status import ExecutionStatus
from . import engine_tables as et
from .db import Database

#: Percentile reads per statement (SQLite allows 500 terms in a compound SELECT).
_PARTS_PER_QUERY = 200

_T = et.executions
_TOT = et.execution_totals
_BKT = et.execution_buckets
_RAN = _TOT.c.denial == ""


def _sum_if(condition: Any, value: Any = 1) -> Any:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, value), else_=0)), 0)


def _ran(status: str) -> Any:
    return _sum_if(_RAN & (_TOT.c.status == status), _TOT.c.calls)


@dataclass(frozen=True)
class MetricsRows:
    """What one snapshot reads, as rows with named fields."""

    tools: list[Any]
    """Per tool of executions that ran: `tool, category, success, failed, cancelled, timed, dsum, last`."""
    users: list[Any]
    """Per user: `user_name, total, success, failed, cancelled, denied, timed, dsum, last`."""
    categories: list[Any]
    """Per category of executions that ran: `category, n, success, failed, cancelled`."""
    denials: list[Any]
    """Per tool and denial code: `tool, denial, n`."""
    buckets: list[Any]
    """Duration buckets: `tool, bucket, calls`."""
    running: list[Any]
    """Running executions: `tool, category, user_name, started_at`."""
    percentiles: dict[str, tuple[float, float]]
    """Per tool that ran: nearest-rank p50 and p95 durations in milliseconds."""


@dataclass(frozen=True)
class UserToolRows:
    """One user's figures for one tool: ended totals and running ones."""

    ended: Any
    """`total, success, failed, cancelled, denied, timed, dsum, last`."""
    running: Any
    """`n, last`."""


class MetricsReads:
    """Reads the totals metrics are computed from."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def read(
        self, *, tool: str | None = None, user: str | None = None, categories: Collection[str] | None = None
    ) -> MetricsRows:
        """Everything a snapshot needs (about one tool, when `tool` is given; per-user rows only
        of `user`, when given; only executions of tools in `categories`, when given)."""
        scope: list[Any] = [] if tool is None else [_TOT.c.tool == tool]
        if categories is not None:
            scope.append(_TOT.c.category.in_(sorted(categories)))
        user_scope = [*scope, *([_TOT.c.user_name == user] if user is not None else [])]
        async with self.db.begin() as conn:
            tool_rows = (
                await conn.execute(
                    sa.select(
                        _TOT.c.tool,
                        sa.func.max(_TOT.c.category).label("category"),
                        _ran(ExecutionStatus.SUCCESS).label("success"),
                        _ran(ExecutionStatus.FAILED).label("failed"),
                        _ran(ExecutionStatus.CANCELLED).label("cancelled"),
                        _sum_if(_RAN, _TOT.c.timed).label("timed"),
                        _sum_if(_RAN, _TOT.c.duration_sum_ms).label("dsum"),
                        sa.func.max(sa.case((_RAN, _TOT.c.last_started_at))).label("last"),
                    )
                    .where(*scope)
                    .group_by(_TOT.c.tool)
                )
            ).all()
            user_rows = (
                await conn.execute(
                    sa.select(
                        _TOT.c.user_name,
                        sa.func.sum(_TOT.c.calls).label("total"),
                        _ran(ExecutionStatus.SUCCESS).label("success"),
                        _ran(ExecutionStatus.FAILED).label("failed"),
                        _ran(ExecutionStatus.CANCELLED).label("cancelled"),
                        _sum_if(sa.not_(_RAN), _TOT.c.calls).label("denied"),
                        _sum_if(_RAN, _TOT.c.timed).label("timed"),
                        _sum_if(_RAN, _TOT.c.duration_sum_ms).label("dsum"),
                        sa.func.max(_TOT.c.last_started_at).label("last"),
                    )
                    .where(*user_scope)
                    .group_by(_TOT.c.user_name)
                )
            ).all()
            cat_rows = (
                await conn.execute(
                    sa.select(
                        _TOT.c.category,
                        sa.func.sum(_TOT.c.calls).label("n"),
                        _ran(ExecutionStatus.SUCCESS).label("success"),
                        _ran(ExecutionStatus.FAILED).label("failed"),
                        _ran(ExecutionStatus.CANCELLED).label("cancelled"),
                    )
                    .where(*scope, _RAN)
                    .group_by(_TOT.c.category)
                )
            ).all()
            denial_rows = (
                await conn.execute(
                    sa.select(_TOT.c.tool, _TOT.c.denial, sa.func.sum(_TOT.c.calls).label("n"))
                    .where(*scope, sa.not_(_RAN))
                    .group_by(_TOT.c.tool, _TOT.c.denial)
                    .order_by(_TOT.c.tool, _TOT.c.denial)
                )
            ).all()
            bucket_rows = (
                await conn.execute(
                    sa.select(_BKT.c.tool, _BKT.c.bucket, _BKT.c.calls).where(
                        *([] if tool is None else [_BKT.c.tool == tool])
                    )
                )
            ).all()
            # Few rows run at once: read them through the status index and count here (a GROUP BY
            # would tempt SQLite's planner into walking a whole index in group order instead).
            running = [
                r
                for r in await conn.execute(
                    sa.select(_T.c.tool, _T.c.category, _T.c.user_name, _T.c.started_at).where(
                        _T.c.status == ExecutionStatus.RUNNING
                    )
                )
                if (tool is None or r.tool == tool) and (categories is None or r.category in categories)
            ]
            if categories is not None:
                # Duration buckets are kept per tool: keep those of the tools in scope.
                shown = {r.tool for r in tool_rows}
                bucket_rows = [b for b in bucket_rows if b.tool in shown]
            pcts = await self._percentiles(conn, {r.tool: int(r.timed) for r in tool_rows if int(r.timed)})
        return MetricsRows(
            list(tool_rows), list(user_rows), list(cat_rows), list(denial_rows), list(bucket_rows), running, pcts
        )

    async def _percentiles(self, conn: Any, counts: Mapping[str, int]) -> dict[str, tuple[float, float]]:
        """Nearest-rank p50 and p95 of each tool's durations (`counts`: tool -> how many).

        Each value is the k-th shortest duration of the tool, an index range read of
        `ix_executions_tool_duration`; the reads of many tools go in one UNION ALL statement.
        """
        parts = []
        for tool, n in sorted(counts.items()):
            for q in (50, 95):
                rank = (q * n + 99) // 100  # ceil(q% of n), at least 1
                kth = (
                    sa.select(_T.c.duration_ms)
                    .where((_T.c.tool == tool) & _T.c.duration_ms.is_not(None))
                    .order_by(_T.c.duration_ms)
                    .limit(1)
                    .offset(rank - 1)
                    .subquery()
                )
                parts.append(sa.select(sa.literal(tool).label("tool"), sa.literal(q).label("q"), kth.c.duration_ms))
        out: dict[str, list[float]] = {tool: [0.0, 0.0] for tool in counts}
        for i in range(0, len(parts), _PARTS_PER_QUERY):
            for r in await conn.execute(sa.union_all(*parts[i : i + _PARTS_PER_QUERY])):
                out[r.tool][0 if r.q == 50 else 1] = float(r.duration_ms)
        return {tool: (v[0], v[1]) for tool, v in out.items()}

    async def user_tool(self, user: str, tool: str) -> UserToolRows:
        """One user's totals for one tool, and their running executions of it."""
        async with self.db.begin() as conn:
            r = (
                await conn.execute(
                    sa.select(
                        sa.func.coalesce(sa.func.sum(_TOT.c.calls), 0).label("total"),
                        _ran(ExecutionStatus.SUCCESS).label("success"),
                        _ran(ExecutionStatus.FAILED).label("failed"),
                        _ran(ExecutionStatus.CANCELLED).label("cancelled"),
                        _sum_if(sa.not_(_RAN), _TOT.c.calls).label("denied"),
                        _sum_if(_RAN, _TOT.c.timed).label("timed"),
                        _sum_if(_RAN, _TOT.c.duration_sum_ms).label("dsum"),
                        sa.func.max(_TOT.c.last_started_at).label("last"),
                    ).where((_TOT.c.user_name == user) & (_TOT.c.tool == tool))
                )
            ).one()
            running = (
                await conn.execute(
                    sa.select(sa.func.count().label("n"), sa.func.max(_T.c.started_at).label("last")).where(
                        (_T.c.user_name == user) & (_T.c.status == ExecutionStatus.RUNNING) & (_T.c.tool == tool)
                    )
                )
            ).one()
        return UserToolRows(r, running)


__all__ = ["MetricsReads", "MetricsRows", "UserToolRows"]
