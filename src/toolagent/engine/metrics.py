"""Metrics computed from the store, so every process reports the same figures.

- per tool: invocations (calls that passed the gate, running ones included), successes,
  failures, cancellations, average / p50 / p95 time and the last invocation;
- per user: executions by status, denials, average time;
- per category: invocations by status;
- the ten most used tools, denials per tool and reason, and the running executions.

The figures come from the execution totals and the running rows (`store/metrics.py` reads
them), not from scanning the history. Figures shrink when old executions are pruned; Prometheus
reads that as a counter reset.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..model.execution import DURATION_BUCKETS_S
from ..model.permissions import DENIAL_RATE_LIMITED
from ..model.times import as_utc
from ..store.db import Database
from ..store.metrics import MetricsReads
from .prometheus import Histogram, PromDenial, PromSnapshot, PromToolFigures, PromUserFigures

#: How many tools `most_used` lists.
TOP_TOOLS = 10


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class ToolMetrics:
    """One tool's figures."""

    tool: str
    """Qualified name."""
    category: str
    """Its category."""
    invocations: int = 0
    """Calls that passed the gate (running ones included)."""
    successes: int = 0
    """Ended successfully."""
    failures: int = 0
    """Ended failed (denials not included: those never ran)."""
    cancelled: int = 0
    """Cancelled, timeouts included."""
    average_ms: float = 0.0
    """Average duration of the calls that ended."""
    p50_ms: float = 0.0
    """Median duration (nearest rank)."""
    p95_ms: float = 0.0
    """95th percentile duration (nearest rank)."""
    last_invoked: datetime | None = None
    """When it was last called."""
    bucket_counts: tuple[int, ...] = ()
    """Cumulative counts of durations at or under each of `DURATION_BUCKETS_S` (for Prometheus)."""
    duration_sum_ms: float = 0.0
    """Sum of the durations (for Prometheus)."""

    @property
    def ended(self) -> int:
        """Calls that ended (successes, failures and cancellations)."""
        return self.successes + self.failures + self.cancelled

    def to_json(self) -> dict[str, Any]:
        """API form (ToolExecutionMetrics field names)."""
        return {
            "tool": self.tool,
            "category": self.category,
            "totalInvocations": self.invocations,
            "successfulInvocations": self.successes,
            "failedInvocations": self.failures,
            "cancelledInvocations": self.cancelled,
            "averageExecutionTime": self.average_ms,
            "p50ExecutionTime": self.p50_ms,
            "p95ExecutionTime": self.p95_ms,
            "averageExecutionTimeMs": self.average_ms,
            "p50ExecutionTimeMs": self.p50_ms,
            "p95ExecutionTimeMs": self.p95_ms,
            "lastInvoked": _iso(self.last_invoked),
        }


@dataclass(frozen=True)
class UserMetrics:
    """One user's figures."""

    user: str
    """User name."""
    total: int = 0
    """Executions, denied ones included."""
    success: int = 0
    """Ended successfully."""
    failed: int = 0
    """Ended failed (denials not included)."""
    cancelled: int = 0
    """Cancelled."""
    denied: int = 0
    """Refused by the gate."""
    average_ms: float = 0.0
    """Average duration of the executions that ran and ended."""
    last_executed: datetime | None = None
    """When the user last asked for an execution."""

    def to_json(self) -> dict[str, Any]:
        """API form (userStats field names)."""
        return {
            "user": self.user,
            "totalExecutions": self.total,
            "successfulExecutions": self.success,
            "failedExecutions": self.failed,
            "cancelledExecutions": self.cancelled,
            "deniedExecutions": self.denied,
            "averageExecutionTime": self.average_ms,
            "averageExecutionTimeMs": self.average_ms,
            "lastExecuted": _iso(self.last_executed),
        }


@dataclass(frozen=True)
class CategoryMetrics:
    """One category's figures."""

    category: str
    """The category."""
    invocations: int = 0
    """Calls that passed the gate."""
    success: int = 0
    """Ended successfully."""
    failed: int = 0
    """Ended failed."""
    cancelled: int = 0
    """Cancelled."""

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "category": self.category,
            "invocations": self.invocations,
            "success": self.success,
            "failed": self.failed,
            "cancelled": self.cancelled,
        }


@dataclass(frozen=True)
class DenialCount:
    """Calls to one tool refused for one reason."""

    tool: str
    """Qualified name."""
    reason: str
    """Denial code: `level`, `not_in_agent`, `disabled`, `api_key_scope`, `api_key_revoked`, `rate_limited`, `budget`."""
    count: int
    """How many."""

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {"tool": self.tool, "reason": self.reason, "count": self.count}


@dataclass(frozen=True)
class MetricsSnapshot:
    """Every figure at one moment."""

    generated_at: datetime
    """When it was computed (UTC)."""
    tools: tuple[ToolMetrics, ...] = ()
    """Per tool, by name (registered tools without calls included)."""
    users: tuple[UserMetrics, ...] = ()
    """Per user, by name."""
    categories: tuple[CategoryMetrics, ...] = ()
    """Per category with calls, by name."""
    most_used: tuple[tuple[str, int], ...] = ()
    """Up to ten (tool, invocations), most used first."""
    denials: tuple[DenialCount, ...] = ()
    """Refusals per tool and reason."""
    active: int = 0
    """Executions running now, in every process."""
    total_tools: int = 0
    """Tools registered in this engine."""
    user_stats: UserMetrics | None = None
    """The asking user's own figures."""
    tool: str | None = None
    """The one tool asked about, if any."""
    buckets_s: tuple[float, ...] = field(default=DURATION_BUCKETS_S)
    """Bounds of `ToolMetrics.bucket_counts`."""

    def tool_metrics(self, name: str) -> ToolMetrics | None:
        """One tool's figures."""
        return next((t for t in self.tools if t.tool == name), None)

    @property
    def rate_limited(self) -> dict[str, int]:
        """Rate-limited calls per tool."""
        out: dict[str, int] = {}
        for d in self.denials:
            if d.reason == DENIAL_RATE_LIMITED:
                out[d.tool] = out.get(d.tool, 0) + d.count
        return out

    def to_json(self) -> dict[str, Any]:
        """API form (getToolMetrics field names, plus `tools`, `users`, `categories` and `denials` in full)."""
        if self.tool is not None:
            one = self.tool_metrics(self.tool)
            registry: dict[str, Any] = one.to_json() if one is not None else {"tool": self.tool, "totalInvocations": 0}
        else:
            registry = {"totalTools": self.total_tools}
        return {
            "registryMetrics": registry,
            "activeExecutions": self.active,
            "userStats": self.user_stats.to_json() if self.user_stats is not None else None,
            "categoryStats": {c.category: c.invocations for c in self.categories},
            "toolUsageStats": {t.tool: t.invocations for t in self.tools},
            "mostUsedTools": [{"tool": name, "count": count} for name, count in self.most_used],
            "timestamp": self.generated_at.isoformat(),
            "tools": [t.to_json() for t in self.tools],
            "users": [u.to_json() for u in self.users],
            "categories": [c.to_json() for c in self.categories],
            "denials": [d.to_json() for d in self.denials],
        }

    def to_prometheus(self, discovery: Mapping[str, int] | None = None) -> PromSnapshot:
        """The figures as `toolagent.engine.prometheus.render` takes them."""
        tools = []
        for t in self.tools:
            hist = None
            if len(t.bucket_counts) == len(self.buckets_s):
                hist = Histogram(tuple(self.buckets_s), t.bucket_counts, t.duration_sum_ms / 1000, t.ended)
            tools.append(PromToolFigures(t.tool, t.category, t.successes, t.failures, t.cancelled, histogram=hist))
        gate = tuple(PromDenial(d.tool, d.reason, d.count) for d in self.denials if d.reason != DENIAL_RATE_LIMITED)
        users = tuple(PromUserFigures(u.user, u.success, u.failed, u.cancelled, u.denied) for u in self.users)
        return PromSnapshot(
            tools=tuple(tools),
            denials=gate,
            rate_limited=self.rate_limited,
            active=self.active,
            users=users,
            discovery=dict(discovery or {}),
            buckets_s=self.buckets_s,
        )


def _avg(total_ms: Any, count: Any) -> float:
    return float(total_ms) / int(count) if count else 0.0


class Metrics:
    """Computes `MetricsSnapshot`s from the store's execution totals (see `store/engine_tables.py`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.reads = MetricsReads(db)
        self.buckets_s = DURATION_BUCKETS_S

    async def snapshot(
        self,
        *,
        tool: str | None = None,
        registered: Mapping[str, str] | None = None,
        user: str | None = None,
        only_user: bool = False,
        now: datetime | None = None,
        categories: Collection[str] | None = None,
    ) -> MetricsSnapshot:
        """Every figure (about one tool, when `tool` is given).

        Args:
            tool: Only this tool.
            registered: Registered tools (name -> category), listed even without calls.
            user: The asking user, whose own figures go in `user_stats`.
            only_user: List only `user` in `users` (for non-admins).
            now: The snapshot's time (default: now).
            categories: Only tools of these categories, and only their executions in every figure
                (a scoped API key's view); None: every category.
        """
        if categories is not None and registered is not None:
            registered = {name: c for name, c in registered.items() if c in categories}
        rows = await self.reads.read(tool=tool, user=user if only_user else None, categories=categories)
        tool_rows, user_rows, cat_rows, denial_rows = rows.tools, rows.users, rows.categories, rows.denials
        bucket_rows, running, pcts = rows.buckets, rows.running, rows.percentiles

        running_tools: dict[str, int] = {}
        running_since: dict[str, datetime | None] = {}
        running_users: dict[str, tuple[int, datetime | None]] = {}
        running_cats: dict[str, int] = {}
        for run in running:
            started = as_utc(run.started_at)
            running_tools[run.tool] = running_tools.get(run.tool, 0) + 1
            running_since[run.tool] = _max_time(running_since.get(run.tool), started)
            n, last = running_users.get(run.user_name, (0, None))
            running_users[run.user_name] = (n + 1, _max_time(last, started))
            running_cats[run.category] = running_cats.get(run.category, 0) + 1
        buckets: dict[str, list[int]] = {}
        for b in bucket_rows:
            per = buckets.setdefault(b.tool, [0] * (len(self.buckets_s) + 1))
            per[min(int(b.bucket), len(self.buckets_s))] += int(b.calls)
        tools: dict[str, ToolMetrics] = {}
        for name, category in (registered or {}).items():
            if tool is None or name == tool:
                tools[name] = ToolMetrics(
                    name,
                    category,
                    bucket_counts=(0,) * len(self.buckets_s),
                    invocations=running_tools.get(name, 0),
                    last_invoked=running_since.get(name),
                )
        for r in tool_rows:
            ended = int(r.success) + int(r.failed) + int(r.cancelled)
            p50, p95 = pcts.get(r.tool, (0.0, 0.0))
            tools[r.tool] = ToolMetrics(
                r.tool,
                (registered or {}).get(r.tool, r.category),
                ended + running_tools.get(r.tool, 0),
                int(r.success),
                int(r.failed),
                int(r.cancelled),
                _avg(r.dsum, r.timed),
                p50,
                p95,
                _max_time(as_utc(r.last), running_since.get(r.tool)),
                tuple(itertools.accumulate(buckets.get(r.tool, [0] * (len(self.buckets_s) + 1))[:-1])),
                float(r.dsum),
            )
        for name, n in running_tools.items():
            if name not in tools:
                tools[name] = ToolMetrics(
                    name, "", n, last_invoked=running_since.get(name), bucket_counts=(0,) * len(self.buckets_s)
                )
        users: dict[str, UserMetrics] = {}
        for u in user_rows:
            n_running, last_running = running_users.get(u.user_name, (0, None))
            users[u.user_name] = UserMetrics(
                u.user_name,
                int(u.total) + n_running,
                int(u.success),
                int(u.failed),
                int(u.cancelled),
                int(u.denied),
                _avg(u.dsum, u.timed),
                _max_time(as_utc(u.last), last_running),
            )
        for name, (n_running, last_running) in running_users.items():
            if name not in users and (not only_user or name == user):
                users[name] = UserMetrics(name, n_running, last_executed=last_running)
        own = users.get(user, UserMetrics(user)) if user is not None else None
        ordered = tuple(tools[k] for k in sorted(tools))
        ranked = sorted((t for t in ordered if t.invocations), key=lambda t: (-t.invocations, t.tool))[:TOP_TOOLS]
        return MetricsSnapshot(
            generated_at=now or datetime.now(UTC),
            tools=ordered,
            users=tuple(users[k] for k in sorted(users)),
            categories=_categories(cat_rows, running_cats),
            most_used=tuple((t.tool, t.invocations) for t in ranked),
            denials=tuple(DenialCount(r.tool, r.denial, int(r.n)) for r in denial_rows),
            active=sum(running_tools.values()),
            total_tools=len(registered or {}),
            user_stats=own,
            tool=tool,
            buckets_s=self.buckets_s,
        )

    async def user_tool_stats(self, user: str, tool: str) -> UserMetrics:
        """One user's figures for one tool (getToolDetails `userStats`)."""
        read = await self.reads.user_tool(user, tool)
        r, running = read.ended, read.running
        return UserMetrics(
            user,
            int(r.total) + int(running.n),
            int(r.success),
            int(r.failed),
            int(r.cancelled),
            int(r.denied),
            _avg(r.dsum, r.timed),
            _max_time(as_utc(r.last), as_utc(running.last)),
        )


def _categories(ended: Any, running: Mapping[str, int]) -> tuple[CategoryMetrics, ...]:
    out = {
        r.category: CategoryMetrics(r.category, int(r.n), int(r.success), int(r.failed), int(r.cancelled))
        for r in ended
    }
    for category, n in running.items():
        c = out.get(category) or CategoryMetrics(category)
        out[category] = replace(c, invocations=c.invocations + n)
    return tuple(out[k] for k in sorted(out))


def _max_time(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(a, b) if a is not None and b is not None else a or b


__all__ = ["TOP_TOOLS", "CategoryMetrics", "DenialCount", "Metrics", "MetricsSnapshot", "ToolMetrics", "UserMetrics"]
