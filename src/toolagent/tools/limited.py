"""Limits and budgets: count the call against the caller's rate limits and monthly budget.

The counters advance inside the admission write (the record layer runs this layer's hook
there), so a call is counted exactly when its `running` row commits, and a refusal
(`RateLimited`, `BudgetExceeded`) rolls that call's admission back — its savepoint when the
admission shares a group-committed transaction with other calls', whose counts stand; the record
layer then records the refusal. The counters are taken one call after another inside the
transaction, so a batch admits exactly what the same calls one by one would. Exactness across
processes comes from the store's counters, not from this process.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._evolve import evolve
from ..engine.limits import Limits
from ..model.execution import Execution
from ..model.limits import LimitStatus
from ..store.db import Connection
from .base import CallContext, CallOutcome, ToolCall, WrappedSource


@dataclass
class LimitedSource(WrappedSource):
    """Adds the limit counters to the call's admission."""

    limits: Limits

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Pass the call on with this caller's counters to advance at admission."""
        principal = ctx.principal

        def count(conn: Connection, execution: Execution) -> list[LimitStatus]:
            return self.limits.consume(
                conn, principal.name, principal.plan, tool=execution.tool, category=execution.category
            )

        return await self.inner.call_tool(evolve(call, admission=(*call.admission, count)), ctx)


__all__ = ["LimitedSource"]
