"""The execution record and audit trail: every admitted call is stored `running`, then final.

A call is first screened by the admission checks (`admission.py`: the policy, then the others in
their order), before any I/O; a refusal is recorded `denied` and the call goes no further.
Admission is then one write (`Recorder.admit`: the checks' in-transaction part, the `running`
row, the `allow` audit row), committed before the call runs; the outcome is another (`Recorder.finish`,
shielded, so a cancelled caller never loses its history entry), committed before the outcome is
returned — or, for a caller that asked to settle it itself (`CallContext.settle_later`), queued
to ride with the next commit and settled by that caller (`CallOutcome.settle`). Concurrent
calls' writes share transactions (group commit, `tools/records.py`). Between them the inner
layers run the call; whatever they answer or raise becomes the stored outcome:

| inner answer                    | stored status | outcome status |
| ---                             | ---           | ---            |
| result                          | success       | ok             |
| result with `is_error`          | failed        | failed         |
| `timed_out` (timeout layer)     | cancelled     | timed_out      |
| `cancelled` (cancel by id)      | cancelled     | cancelled      |
| `ToolAgentError` raised         | failed        | failed         |
| the calling task was cancelled  | cancelled     | (re-raised)    |

The stored result is bounded in bytes (`bounds.py`, `max_result_bytes`): a larger one is stored,
and handed back on the outcome's record, in its bounded form saying `truncated`; the outcome's
own `result` stays whole for the caller that is waiting on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio

from .._evolve import evolve
from ..engine.limits import Clock
from ..engine.logs import log_context
from ..errors import BudgetExceeded, ExecutionDenied, RateLimited, ToolAgentError
from ..model.bounds import DEFAULT_MAX_RESULT_BYTES, bound_result, looks_large
from ..model.execution import Execution
from ..model.permissions import DENIAL_BUDGET, DENIAL_RATE_LIMITED
from ..model.redaction import redact_text
from ..model.spec import ToolResult
from ..model.status import CALL_STATUS_OF, CallStatus, ExecutionStatus, stored_status
from ..policy import Decision
from .admission import AdmissionCheck
from .base import AdmissionHook, CallContext, CallOutcome, ToolCall, WrappedSource
from .records import Recorder


@dataclass
class RecordedSource(WrappedSource):
    """Stores each call before and after it runs; see the module docstring."""

    recorder: Recorder
    clock: Clock = field(default=time.time)
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """Largest result stored with an execution (bytes of compact JSON)."""
    checks: tuple[AdmissionCheck, ...] = ()
    """What a call must pass before it runs, in order (`admission.py`)."""

    def _screen(self, call: ToolCall, ctx: CallContext) -> Decision | None:
        for check in self.checks:
            refusal = check.screen(call, ctx)
            if refusal is not None:
                return refusal
        return None

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """The inner checks (arguments, SQL) only for a call the admission checks let through:
        nothing of a refused caller's input is parsed on its behalf; `call_tool` then refuses and
        records the call."""
        if self._screen(call, ctx) is None:
            await self.inner.check(call, ctx)

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Screen, admit, run and record one call."""
        refusal = self._screen(call, ctx)
        if refusal is not None:
            return await refuse(self.recorder, call, self.recorder.draft(call, ctx), refusal)
        hooks = tuple(_hook(check, call, ctx) for check in self.checks if check.admits(ctx))
        self.recorder.calls_under_way += 1
        try:
            draft = self.recorder.draft(call, ctx)
            try:
                # Once the running row commits, the call must get to close it: the admission's
                # write is shielded (`GroupCommit.settle`) and nothing after it checks for
                # cancellation before `_run`, which records a cancellation of the caller meanwhile.
                admitted = await self.recorder.admit(draft, hooks)
            except (RateLimited, BudgetExceeded) as exc:
                code = DENIAL_RATE_LIMITED if isinstance(exc, RateLimited) else DENIAL_BUDGET
                record = await self.recorder.deny(draft, code, exc.message)
                return denied_outcome(call, record, exc, code, exc.message)
            if isinstance(admitted, Decision):
                return await refuse(self.recorder, call, draft, admitted)
            if admitted.status != ExecutionStatus.RUNNING:  # its run was cancelled: never started
                return CallOutcome(
                    CallStatus.CANCELLED,
                    call.name,
                    admitted.id,
                    reason=admitted.reason,
                    error=admitted.reason,
                    ended_at=admitted.ended_at,
                    record=admitted,
                )
            if ctx.on_admitted is not None:
                ctx.on_admitted(admitted)
            with log_context(execution_id=admitted.id, tool=admitted.tool, user=admitted.user, run_id=admitted.run_id):
                return await self._run(call, ctx, admitted)
        finally:
            self.recorder.calls_under_way -= 1

    async def _run(self, call: ToolCall, ctx: CallContext, execution: Execution) -> CallOutcome:
        started = time.perf_counter()
        try:
            await self.recorder.emit("execution_started", execution)
            outcome = await self.inner.call_tool(call, ctx)
        except anyio.get_cancelled_exc_class():
            # The caller's own task was cancelled (a sibling step failed, the run was stopped):
            # record it, then let the cancellation go on.
            await self._finish(
                execution,
                started,
                CallOutcome(CallStatus.CANCELLED, call.name, reason="cancelled: the calling task was cancelled"),
            )
            raise
        except ToolAgentError as exc:
            outcome = CallOutcome(CallStatus.FAILED, call.name, error=exc.message, exception=exc)
        except Exception as exc:
            await self._finish(
                execution,
                started,
                CallOutcome(CallStatus.FAILED, call.name, error=f"internal error: {type(exc).__name__}: {exc}"),
            )
            raise
        return await self._finish(execution, started, outcome, settle_later=ctx.settle_later)

    async def _stored_result(self, result: ToolResult | None) -> ToolResult | None:
        """The result as the execution keeps it: bounded to `max_result_bytes` (a large one off the
        event loop, shielded: the record needs it whatever happens to the caller)."""
        if result is None:
            return None
        if looks_large(result):
            with anyio.CancelScope(shield=True):
                return await anyio.to_thread.run_sync(bound_result, result, self.max_result_bytes)
        return bound_result(result, self.max_result_bytes)

    async def _finish(
        self, execution: Execution, started: float, outcome: CallOutcome, *, settle_later: bool = False
    ) -> CallOutcome:
        duration_ms = (time.perf_counter() - started) * 1000
        result = await self._stored_result(outcome.result)
        ended = evolve(
            execution,
            status=stored_status(outcome.status),
            ended_at=datetime.fromtimestamp(self.clock(), UTC),
            duration_ms=duration_ms,
            result=result,
            error=redact_text(outcome.error) if outcome.error and outcome.status is not CallStatus.CANCELLED else None,
            reason=outcome.reason,
        )
        settle = self.recorder.finish_later(ended)
        if settle_later:
            # The caller settles the write (a BUILD step's run, before it ends): it goes on now.
            return evolve(
                outcome,
                execution_id=ended.id,
                error=ended.error or outcome.error,
                reason=ended.reason,
                duration_ms=ended.duration_ms,
                ended_at=ended.ended_at,
                limits=execution.limits,
                record=ended,
                settle=settle,
            )
        stored = await settle()
        status = outcome.status if stored is ended else _called(stored)
        return evolve(
            outcome,
            status=status,
            execution_id=stored.id,
            error=stored.error or outcome.error,
            reason=stored.reason,
            duration_ms=stored.duration_ms,
            ended_at=stored.ended_at,
            limits=execution.limits,
            record=stored,
        )


def _hook(check: AdmissionCheck, call: ToolCall, ctx: CallContext) -> AdmissionHook:
    return lambda conn, execution: check.admit(conn, call, ctx, execution)


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


async def refuse(recorder: Recorder, call: ToolCall, draft: Execution, decision: Decision) -> CallOutcome:
    """Record an admission check's `decision` as a denial of `draft`; the outcome carries `ExecutionDenied`."""
    code, reason = decision.code or "denied", decision.reason or "denied"
    record = await recorder.deny(draft, code, reason)
    exc = ExecutionDenied(
        decision, tool=call.name, level=draft.level or "", risk=call.entry.risk, execution_id=record.id
    )
    return denied_outcome(call, record, exc, code, reason)


def _called(record: Any) -> CallStatus:
    """The outcome status of a record someone else closed."""
    return CALL_STATUS_OF.get(record.status, CallStatus.CANCELLED)


__all__ = ["RecordedSource", "denied_outcome", "refuse"]
