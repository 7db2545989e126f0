"""Admission checks: what a call must pass before it runs, in order, inside its one admission.

The record layer (`recorded.py`) runs the checks of its list for every call:

1. `screen(call, ctx)`, before any I/O, in list order: a refusal is recorded (`denied`) and
   nothing else runs, not even the inner layers' argument and SQL checks; nothing of a refused
   caller's input is parsed on its behalf;
2. `admit(conn, call, ctx, execution)`, inside the admission transaction that also writes the
   `running` row and the `allow` audit row, in list order: a check may refuse (a `Decision`),
   count (`LimitStatus`es), or raise `RateLimited` / `BudgetExceeded` having written nothing.

Refusals from either phase are recorded in one place, the record layer. A new concern that must
be decided before a call runs (a policy rule, consuming an approval) is one more check in the
list that `stack.build_tool_stack` is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..engine.limits import Limits
from ..engine.principals import Principals
from ..model.execution import Execution
from ..model.limits import LimitStatus
from ..policy import Decision, Policy
from ..store.batch import read_once
from ..store.db import Connection
from .base import CallContext, ToolCall


class AdmissionCheck:
    """One check of a call's admission; both phases default to "no objection"."""

    def admits(self, ctx: CallContext) -> bool:
        """Whether `admit` has anything to do for this caller (else the transaction is left alone)."""
        return True

    def screen(self, call: ToolCall, ctx: CallContext) -> Decision | None:
        """Before any I/O: a refusal, or None to let the call go on. Pure: it may be asked more than
        once for one call (before the inner argument checks, and again as the call is admitted)."""
        return None

    def admit(
        self, conn: Connection, call: ToolCall, ctx: CallContext, execution: Execution
    ) -> Decision | Sequence[LimitStatus] | None:
        """Inside the admission transaction: a refusal, the counters advanced, or None."""
        return None


@dataclass
class PolicyCheck(AdmissionCheck):
    """The one `Policy` decides; a call made with an API key has it read again at admission.

    The key is read inside the admission transaction because it may have been revoked since the
    caller authenticated, and a refusal then is recorded as any other. Calls of one key admitted
    in one batch share that read (`store.batch.read_once`: each was made before the batch's
    transaction began).
    """

    policy: Policy = field(default_factory=Policy)

    def screen(self, call: ToolCall, ctx: CallContext) -> Decision | None:
        """`Policy.decide` with the call's arguments; None when it allows."""
        decision = self.policy.decide(ctx.principal, call.entry, args=call.arguments, context=ctx)
        return None if decision.allowed else decision

    def admits(self, ctx: CallContext) -> bool:
        """Only a call made with an API key is decided again."""
        return ctx.api_key is not None

    def admit(self, conn: Connection, call: ToolCall, ctx: CallContext, execution: Execution) -> Decision | None:
        """The decision again with the key as stored now (a key deleted since counts as revoked)."""
        key = ctx.api_key
        if key is None:
            return None
        fresh = read_once(("api_key", key.id), lambda: Principals.key_in(conn, key.id))
        now = fresh if fresh is not None else replace(key, revoked_at=key.revoked_at or execution.started_at)
        decision = self.policy.decide(ctx.principal, call.entry, args=call.arguments, context=ctx, key=now)
        return None if decision.allowed else decision


@dataclass
class LimitCheck(AdmissionCheck):
    """Counts the call against the caller's rate limits and monthly budget.

    The counters advance inside the admission write, so a call is counted exactly when its
    `running` row commits, and a refusal (`RateLimited`, `BudgetExceeded`) rolls that call's
    admission back: its savepoint when the admission shares a group-committed transaction with
    other calls', whose counts stand. The counters are taken one call after another inside the
    transaction, so a batch admits exactly what the same calls one by one would; exactness across
    processes comes from the store's counters.
    """

    limits: Limits

    def admit(self, conn: Connection, call: ToolCall, ctx: CallContext, execution: Execution) -> Sequence[LimitStatus]:
        """The counters this call advanced (raises the refusal, having written nothing)."""
        principal = ctx.principal
        return self.limits.consume(
            conn, principal.name, principal.plan, tool=execution.tool, category=execution.category
        )


__all__ = ["AdmissionCheck", "LimitCheck", "PolicyCheck"]
