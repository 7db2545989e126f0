"""The gate, outermost: may this caller run this tool at all?

`Policy.decide` runs first and costs no I/O: the tool is enabled, it is in the agent's tool
list, the caller's level covers its risk, the API key is active and in scope. A refusal is
recorded (denied, never sent) and the call goes no further. An allowed call carries one more
check down to the admission transaction: the key is read again there, because it may have been
revoked since the caller authenticated, and a refusal then is recorded the same way. Calls of one
key admitted in one batch share that read (`store.batch.read_once`: each was made before the
batch's transaction began).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .._evolve import evolve
from ..engine.principals import Principals
from ..errors import ExecutionDenied
from ..model.execution import Execution
from ..model.status import CallStatus
from ..policy import Decision, Policy
from ..store.batch import read_once
from ..store.db import Connection
from .base import CallContext, CallOutcome, ToolCall, WrappedSource
from .records import Recorder


def denied_outcome(call: ToolCall, record: Execution, exception: Any, code: str, reason: str) -> CallOutcome:
    """The outcome of a refused call, as recorded."""
    return CallOutcome(
        CallStatus.DENIED,
        call.name,
        record.id,
        error=reason,
        reason=reason,
        denial=code,
        exception=exception,
        ended_at=record.ended_at,
        record=record,
    )


@dataclass
class GateSource(WrappedSource):
    """Refuses (and records) calls the caller may not make; see the module docstring."""

    recorder: Recorder
    policy: Policy = field(default_factory=Policy)

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """The inner checks (arguments, SQL) only for a caller the gate admits: nothing of a refused
        caller's input is parsed on its behalf; `call_tool` then refuses and records the call."""
        if self.policy.decide(ctx.principal, call.entry, args=call.arguments, context=ctx).allowed:
            await self.inner.check(call, ctx)

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Decide; refuse and record, or pass the call on with the key re-check for admission."""
        decision = self.policy.decide(ctx.principal, call.entry, args=call.arguments, context=ctx)
        if not decision.allowed:
            return await self.refuse(call, ctx, self.recorder.draft(call, ctx), decision)
        key = ctx.api_key
        if key is None:
            return await self.inner.call_tool(call, ctx)
        policy = self.policy

        def recheck(conn: Connection, execution: Execution) -> Decision:
            fresh = read_once(("api_key", key.id), lambda: Principals.key_in(conn, key.id))
            # A key deleted since the caller authenticated counts as revoked when the call began.
            now = fresh if fresh is not None else replace(key, revoked_at=key.revoked_at or execution.started_at)
            return policy.decide(ctx.principal, call.entry, args=call.arguments, context=ctx, key=now)

        # The record layer runs the re-check in its admission transaction and records a refusal.
        return await self.inner.call_tool(evolve(call, admission=(recheck, *call.admission)), ctx)

    async def refuse(self, call: ToolCall, ctx: CallContext, draft: Execution, decision: Decision) -> CallOutcome:
        """Record `decision` as a denial of `draft` and answer with it."""
        return await refuse(self.recorder, call, draft, decision)


async def refuse(recorder: Recorder, call: ToolCall, draft: Execution, decision: Decision) -> CallOutcome:
    """Record the gate's `decision` as a denial of `draft`; the outcome carries `ExecutionDenied`."""
    code, reason = decision.code or "denied", decision.reason or "denied"
    record = await recorder.deny(draft, code, reason)
    exc = ExecutionDenied(
        decision, tool=call.name, level=draft.level or "", risk=call.entry.risk, execution_id=record.id
    )
    return denied_outcome(call, record, exc, code, reason)


__all__ = ["GateSource", "denied_outcome", "refuse"]
