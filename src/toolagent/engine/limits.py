"""Rate limits and monthly budgets, counted in the store so every process shares them.

Each limit is a fixed-window counter row in `limit_counters` (see `store/engine_tables.py`):

- the plan's calls per minute per user (`rate|USER`), windows aligned on the clock's minutes;
- per-user limits on a category or a tool, when the config sets them (`rate|USER|category:C`,
  `rate|USER|tool:T`);
- the plan's tool calls per calendar month, UTC (`budget|USER`).

A call takes one unit from every counter that applies, in that order, inside the caller's
transaction; the first counter that is full raises `RateLimited` (or `BudgetExceeded`) and the
transaction rolls back, so a refused call uses up nothing. Taking a unit is atomic across tasks
and processes (`store/limits.py` says how). Counters are always taken in the same order, so two
transactions never wait on each other's rows in a cycle.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import BudgetExceeded, RateLimited
from ..model.limits import LimitKind, LimitStatus
from ..store.db import Connection, Database
from ..store.limits import LimitCounters
from .config import EngineConfig

#: Length of a rate window.
RATE_WINDOW_S = 60

Clock = Callable[[], float]


@dataclass(frozen=True)
class LimitRule:
    """One counter that applies to a call."""

    key: str
    """The counter's row key."""
    kind: LimitKind
    """`rate` (per minute) or `budget` (per month)."""
    scope: str
    """What it limits, for messages: `calls per minute`, `calls per minute to tools of category shell`, ..."""
    limit: int
    """Calls allowed per window."""
    window_no: int
    """The current window's number."""
    reset_at_s: float
    """When the current window ends (clock seconds)."""


class BudgetUsedUp(BudgetExceeded):
    """The monthly tool-call budget of the caller's plan is used up (TOO_MANY_REQUESTS)."""

    def __init__(self, message: str, *, limit: int, retry_after_s: float) -> None:
        self.limit = limit
        self.remaining = 0
        self.retry_after_s = retry_after_s
        super().__init__(message)


def month_window(now_s: float) -> tuple[int, float]:
    """The calendar month (UTC) holding `now_s`: its number and when it ends."""
    moment = datetime.fromtimestamp(now_s, UTC)
    number = moment.year * 12 + moment.month - 1
    year, month = divmod(number + 1, 12)
    return number, datetime(year, month + 1, 1, tzinfo=UTC).timestamp()


def _scope_text(kind: LimitKind, target: str | None) -> str:
    if kind == "budget":
        return "tool calls per month"
    return "calls per minute" + (f" to {target}" if target else "")


class Limits:
    """Counts calls against the rate limits and budgets of the engine config."""

    def __init__(self, db: Database, config: EngineConfig | None = None, *, clock: Clock = time.time) -> None:
        self.db = db
        self.config = config or EngineConfig()
        self.clock = clock
        self.counters = LimitCounters(db)

    def rules(
        self, user: str, plan: str, *, tool: str | None = None, category: str | None = None, now_s: float | None = None
    ) -> list[LimitRule]:
        """The counters a call by `user` to `tool` (of `category`) takes from, in taking order."""
        now = self.clock() if now_s is None else now_s
        minute = int(now // RATE_WINDOW_S)
        minute_end = (minute + 1) * RATE_WINDOW_S
        settings = self.config.plan(plan)
        out: list[LimitRule] = []
        if settings.rate_per_minute is not None:
            out.append(
                LimitRule(
                    f"rate|{user}", "rate", _scope_text("rate", None), settings.rate_per_minute, minute, minute_end
                )
            )
        if category is not None and category in self.config.category_rate_per_minute:
            out.append(
                LimitRule(
                    f"rate|{user}|category:{category}",
                    "rate",
                    _scope_text("rate", f"tools of category {category}"),
                    self.config.category_rate_per_minute[category],
                    minute,
                    minute_end,
                )
            )
        if tool is not None and tool in self.config.tool_rate_per_minute:
            out.append(
                LimitRule(
                    f"rate|{user}|tool:{tool}",
                    "rate",
                    _scope_text("rate", f"'{tool}'"),
                    self.config.tool_rate_per_minute[tool],
                    minute,
                    minute_end,
                )
            )
        if settings.monthly_budget is not None:
            month, month_end = month_window(now)
            out.append(
                LimitRule(
                    f"budget|{user}", "budget", _scope_text("budget", None), settings.monthly_budget, month, month_end
                )
            )
        return out

    def consume(self, conn: Connection, user: str, plan: str, *, tool: str, category: str) -> list[LimitStatus]:
        """Take one call from every counter that applies, inside `conn`'s transaction.

        Returns:
            Where each counter stands after this call.

        Raises:
            RateLimited: a rate counter is full.
            BudgetExceeded: the monthly budget is used up.
            Either way the counters taken before the full one are given back first, so a refused
            call has counted nothing and the transaction may go on (other calls' admissions share it).
        """
        now = self.clock()
        statuses: list[LimitStatus] = []
        taken: list[LimitRule] = []
        for rule in self.rules(user, plan, tool=tool, category=category, now_s=now):
            used = self._take(conn, rule)
            reset_in = max(0.0, rule.reset_at_s - now)
            if used is None:
                for earlier in taken:
                    self.counters.give_back_in(conn, earlier.key, earlier.window_no)
                raise self._refusal(user, plan, rule, reset_in)
            taken.append(rule)
            statuses.append(LimitStatus(rule.kind, rule.scope, rule.limit, used, reset_in))
        return statuses

    async def take(self, user: str, plan: str, *, tool: str, category: str) -> list[LimitStatus]:
        """`consume` in a transaction of its own."""
        return await self.db.write(lambda conn: self.consume(conn, user, plan, tool=tool, category=category))

    async def usage(
        self, user: str, plan: str, *, tool: str | None = None, category: str | None = None
    ) -> list[LimitStatus]:
        """Where the counters of `user` stand now, without counting anything."""
        now = self.clock()
        rules = self.rules(user, plan, tool=tool, category=category, now_s=now)
        if not rules:
            return []
        rows = await self.counters.read([r.key for r in rules])
        out = []
        for rule in rules:
            window_no, calls = rows.get(rule.key, (rule.window_no, 0))
            used = calls if window_no == rule.window_no else 0
            out.append(LimitStatus(rule.kind, rule.scope, rule.limit, used, max(0.0, rule.reset_at_s - now)))
        return out

    def _take(self, conn: Connection, rule: LimitRule) -> int | None:
        """One unit from `rule`'s counter: the calls counted now, or None when it is full."""
        return self.counters.take_in(conn, rule.key, rule.window_no, rule.limit)

    def _refusal(self, user: str, plan: str, rule: LimitRule, reset_in_s: float) -> RateLimited | BudgetUsedUp:
        if rule.kind == "budget":
            resets = datetime.fromtimestamp(rule.reset_at_s, UTC).date().isoformat()
            return BudgetUsedUp(
                f"user '{user}' has used the monthly budget of plan {plan} ({rule.limit} tool calls per month); "
                f"it resets on {resets} UTC — or move the user to a larger plan with `toolagent users set-plan {user} PLAN`",
                limit=rule.limit,
                retry_after_s=reset_in_s,
            )
        return RateLimited(
            f"user '{user}' exceeded the rate limit of {rule.limit} {rule.scope}; retry in {max(1, round(reset_in_s))} s",
            limit=rule.limit,
            remaining=0,
            retry_after_s=reset_in_s,
        )


__all__ = ["RATE_WINDOW_S", "BudgetUsedUp", "LimitRule", "LimitStatus", "Limits", "month_window"]
