"""What the records say: one execution, running ones, history pages, statistics, metrics, tools.

Read-only views over the store and the catalogue, each scoped to the principal asking (an admin
sees everyone's).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, UsageError
from ..model.entry import ToolEntry
from ..model.execution import Execution
from ..model.limits import LimitStatus
from ..policy import Policy
from ..store.executions import ExecutionStore
from ..store.history import Stats
from .config import EngineConfig
from .history import History, HistoryPage, HistoryQuery
from .limits import Limits
from .metrics import Metrics, MetricsSnapshot, ToolMetrics, UserMetrics
from .principals import Principal
from .registry import ToolListing

if TYPE_CHECKING:
    from ..tools.catalogue import Catalogue


@dataclass(frozen=True)
class ToolDetails:
    """getToolDetails: the tool with its schema, its metrics and the caller's own figures."""

    tool: ToolEntry
    """The listed tool."""
    metrics: ToolMetrics
    """Everyone's figures for it."""
    user_stats: UserMetrics
    """The caller's figures for it."""
    runnable: bool
    """Whether the caller may run it, as the policy decides."""
    default_timeout_ms: int
    """The engine's timeout, for a tool whose server config sets none."""

    @property
    def timeout_ms(self) -> int:
        """A call's timeout when the caller gives none: the server config's, else the engine's."""
        spec_s = self.tool.spec.timeout_s
        return round(spec_s * 1000) if spec_s else self.default_timeout_ms

    def to_json(self) -> dict[str, Any]:
        """API form: `tool`, `metrics`, `userStats`, and the timeout a call gets (`timeoutMs`; from
        the server config or the engine default, `timeoutSource`)."""
        return {
            "tool": self.tool.to_json(runnable=self.runnable),
            "metrics": self.metrics.to_json(),
            "userStats": self.user_stats.to_json(),
            "timeoutMs": self.timeout_ms,
            "timeoutSource": "server" if self.tool.spec.timeout_s else "engine",
        }


@dataclass
class Reads:
    """The read side of the runtime (see the module docstring)."""

    config: EngineConfig
    executions: ExecutionStore
    history_store: History
    metrics_store: Metrics
    limits: Limits
    catalogue: Catalogue
    clock: Callable[[], float] = field(default=time.time)
    policy: Policy = field(default_factory=Policy)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def active(self, principal: Principal) -> list[Execution]:
        """Running executions of `principal` (everyone's, for an admin) in every process, oldest first."""
        return await self.executions.running(
            user=None if principal.is_admin else principal.name, categories=principal.categories
        )

    async def history(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> HistoryPage:
        """A page of history with its statistics (`filters`, or `HistoryQuery` fields as keywords)."""
        return await self.history_store.page(principal, filters or HistoryQuery(**kwargs))

    async def stats(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> Stats:
        """Statistics of the executions `filters` match (paging ignored)."""
        return await self.history_store.stats(principal, filters or HistoryQuery(**kwargs))

    async def metrics(
        self, tool: str | None = None, *, principal: Principal | None = None, categories: frozenset[str] | None = None
    ) -> MetricsSnapshot:
        """Every figure (about one tool); with `principal`, its own figures as `user_stats`, and
        only its own line in `users` unless it is an admin. A scoped key sees only the tools of its
        categories and their executions (in every total); one tool outside them is not found.
        `categories` narrows the same way without a principal (the Prometheus exposition).

        Raises:
            NotFound: `tool` is outside the principal's key categories.
        """
        if tool is not None and principal is not None and principal.categories is not None:
            self._visible_tool(tool, principal)  # unscoped callers may ask about tools not listed now
        registered = {e.name: e.category for e in self.catalogue.registry.entries()}
        return await self.metrics_store.snapshot(
            tool=tool,
            registered=registered,
            user=principal.name if principal else None,
            only_user=principal is not None and not principal.is_admin,
            now=self._now(),
            categories=principal.categories if principal is not None else categories,
        )

    async def list_tools(
        self,
        principal: Principal | None = None,
        *,
        category: str | None = None,
        search: str | None = None,
        tags: Sequence[str] | None = None,
        include_deprecated: bool = False,
        include_disabled: bool = False,
    ) -> ToolListing:
        """Discovery over the listed tools; for `principal`, only those of its key's categories,
        each marked runnable as the policy decides (what a call of it would be told).

        Raises:
            UsageError: unknown category.
        """
        if principal is None:
            visible = runnable = None
        else:
            decide = self.policy.decide

            def runnable(entry: ToolEntry) -> bool:
                return decide(principal, entry).allowed

            visible = None if principal.categories is None else (lambda e: principal.sees_category(e.category))
        return self.catalogue.listing(
            category=category,
            search=search,
            tags=tags,
            include_deprecated=include_deprecated,
            include_disabled=include_disabled,
            visible=visible,
            runnable=runnable,
        )

    async def tool_details(self, name: str, principal: Principal) -> ToolDetails:
        """A tool with its schema, its metrics and the caller's own figures for it.

        Raises:
            NotFound: no such tool.
        """
        entry = self._visible_tool(name, principal)
        snapshot = await self.metrics_store.snapshot(tool=name, registered={name: entry.category}, now=self._now())
        metrics = snapshot.tool_metrics(name) or ToolMetrics(name, entry.category)
        own = await self.metrics_store.user_tool_stats(principal.name, name)
        return ToolDetails(
            entry, metrics, own, self.policy.decide(principal, entry).allowed, self.config.default_timeout_ms
        )

    def _visible_tool(self, name: str, principal: Principal) -> ToolEntry:
        """The tool, when its category is within the principal's key scopes (else not found, as an
        execution of it would be)."""
        entry = self.catalogue.require(name)
        if not principal.sees_category(entry.category):
            raise NotFound(f"tool '{name}' not found: this API key's scopes do not cover category '{entry.category}'")
        return entry

    async def run_in_scope(self, run_id: str, principal: Principal, tools: Sequence[str]) -> bool:
        """Whether a BUILD run whose steps call `tools` stays within the principal's key categories:
        every step's tool and every execution it recorded (a tool no longer listed counts as outside).
        Always true for an unscoped key or none."""
        if principal.categories is None:
            return True
        categories: set[str | None] = {getattr(self.catalogue.get(tool), "category", None) for tool in tools}
        categories |= await self.executions.run_categories(run_id)
        return all(c is not None and principal.sees_category(c) for c in categories)

    async def limit_status(self, principal: Principal, *, tool: str | None = None) -> list[LimitStatus]:
        """Where `principal`'s rate limits and budget stand (for rate-limit headers)."""
        category = None
        if tool is not None:
            entry = self.catalogue.get(tool)
            category = entry.category if entry is not None else None
        return await self.limits.usage(principal.name, principal.plan, tool=tool, category=category)

    async def prune(self, older_than_days: int | None = None) -> int:
        """Delete executions that ended more than `older_than_days` (default: the config's
        `retention_days`) ago; returns how many."""
        days = self.config.retention_days if older_than_days is None else older_than_days
        if days < 0:
            raise UsageError("older-than-days must be 0 or more")
        return await self.executions.prune(self._now() - timedelta(days=days))


__all__ = ["Reads", "ToolDetails"]
