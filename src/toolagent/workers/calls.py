"""Async single tool calls on the workers (the `tools` queue).

Submitting (the API's async executeTool when execution is `queue`): the call gets its execution
id, the gate's verdict and its argument checks as in process; a refused or malformed call is
answered (and recorded) exactly as in process. An admitted one is stored `queued` (redacted, its
raw arguments aside) with its `tools` job, in one transaction.

Running (a worker): the call goes through the runtime's tool layers (gate, limits, record and
audit, timeout and cancellation, retries, SQL guard, schema), composed by the same function over
the same catalogue, limits and cancellation. Only its record layer differs: its admission
transaction replaces the `queued` row by the `running` one (so the gate's key re-check, the limit
counters and the claim commit together, and a call cancelled meanwhile is never started; a refusal
replaces it the same way), and its rows carry no process id, so a restarted process does not take them for its own orphans: the
reaper judges them by the worker's heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..engine.executions import new_execution_id, resolve_timeout_ms
from ..errors import ToolAgentError
from ..model.entry import ToolEntry
from ..model.execution import Execution
from ..model.status import CallStatus, ExecutionStatus
from ..store.db import Connection, utcnow
from ..store.executions import ExecutionStore
from ..store.queued_calls import QueuedCallStore
from ..tools.admission import AdmissionCheck, LimitCheck, PolicyCheck
from ..tools.base import CallContext, CallOutcome, ToolCall, ToolSource
from ..tools.records import Recorder
from ..tools.under_agent import under_agent

if TYPE_CHECKING:
    from ..runtime import Runtime

logger = logging.getLogger("toolagent.workers.calls")


class NotQueued(Exception):
    """The call is not `queued` any more (cancelled before it started, or admitted elsewhere)."""


class _TakingExecutions(ExecutionStore):
    """Writes a queued call's first row in place of its `queued` one."""

    def insert_many_in(self, conn: Connection, executions: Sequence[Execution]) -> None:
        """Insert `executions`, each replacing the `queued` row of its id.

        An admitted call's `queued` row is already gone (its admission took it, see
        `TakeQueued`); a call the gate refused replaces it here. A row that is no longer queued (the
        call was cancelled meanwhile) stays as it is.
        """
        kept = QueuedCallStore.replace_queued_in(conn, [e.id for e in executions])
        super().insert_many_in(conn, [e for e in executions if e.id not in kept])


class TakeQueued(AdmissionCheck):
    """A queued call's admission takes its `queued` row, in the admission transaction, so the key
    re-check, the claim and the limit counters commit together."""

    def admit(self, conn: Connection, call: ToolCall, ctx: CallContext, execution: Execution) -> None:
        """Take the row.

        Raises:
            NotQueued: it is not queued any more (its admission rolls back whole: nothing starts).
        """
        if not QueuedCallStore.take_in(conn, execution.id):
            raise NotQueued(execution.id)


def queued_call_stack(runtime: Runtime) -> ToolSource:
    """The runtime's tool stack over its catalogue (`Runtime.stack_over`), whose records admit
    queued calls: the claim of the `queued` row is one more admission check."""
    window_s, batch_max = Recorder.batching_of(runtime.settings)
    recorder = Recorder(
        runtime.db, _TakingExecutions(runtime.db), runtime.audit, runtime.events, None, window_s, batch_max
    )  # no owner: the heartbeat says who runs it
    checks = [PolicyCheck(runtime.policy), TakeQueued(), LimitCheck(runtime.limits)]
    return runtime.stack_over(runtime.catalogue, recorder=recorder, checks=checks).source


async def submit_call(
    runtime: Runtime, entry: ToolEntry, arguments: dict[str, Any], ctx: CallContext
) -> Execution | CallOutcome:
    """Queue one async call for the workers.

    Returns:
        The execution as stored (`queued`), or the outcome of a call answered here: malformed
        (`failed`, nothing recorded) or refused by the gate (`denied`, recorded as in process).

    Raises:
        UsageError: the timeout is out of range, or the store is not PostgreSQL.
    """
    stack = runtime.tools
    timeout_ms = resolve_timeout_ms(ctx.timeout_ms, entry.spec.timeout_s, stack.default_timeout_ms)
    now = stack.clock()
    call = ToolCall(entry, dict(arguments), new_execution_id(now), now, timeout_ms)
    if not runtime.policy.decide(ctx.principal, entry, args=call.arguments, context=ctx).allowed:
        return await stack.call(entry, arguments, ctx)  # refused and recorded exactly as in process
    try:
        await stack.source.check(call, ctx)
    except ToolAgentError as exc:
        return CallOutcome(CallStatus.FAILED, call.name, error=exc.message, exception=exc)
    draft = runtime.recorder.draft(call, ctx)  # redacted arguments and metadata
    queued = replace(draft, status=ExecutionStatus.QUEUED, owner=None)
    await runtime.store.queue.calls.submit(
        queued, dict(arguments), dict(ctx.metadata) if ctx.metadata is not None else None, ctx.agent
    )
    return queued


async def run_queued_call(runtime: Runtime, stack: ToolSource, execution_id: str) -> CallOutcome | None:
    """Admit and run a queued call as the caller who submitted it; None when it is not queued
    any more (cancelled before it started, or taken by another job)."""
    calls = runtime.store.queue.calls
    queued = await calls.get(execution_id)
    if queued is None:
        return None
    execution = queued.execution
    try:
        principal = await runtime.principals.get_user(execution.user)
        key = await runtime.principals.get_key(execution.api_key_id) if execution.api_key_id else None
        entry = await runtime.tools.resolve(execution.tool)
        ctx = CallContext(
            principal,
            api_key=key,
            session_id=execution.session_id,
            metadata=queued.metadata,
            timeout_ms=execution.timeout_ms,
        )
        if queued.agent is not None:
            # Under the agent as stored now: its tool list and security block are checked again.
            ctx = await under_agent(runtime.store, queued.agent, ctx)
    except ToolAgentError as exc:
        # Nothing ran: its user, key, tool or agent is gone.
        await calls.close_unstarted(execution_id, f"call could not start: {exc.message}")
        return None
    call = ToolCall(
        entry,
        queued.arguments,
        execution.id,
        execution.started_at.timestamp(),
        execution.timeout_ms or runtime.tools.default_timeout_ms,
    )
    try:
        await stack.check(call, ctx)
    except ToolAgentError as exc:
        await calls.close_unstarted(execution_id, f"call could not start: {exc.message}")
        return None
    try:
        return await stack.call_tool(call, ctx)
    except NotQueued:
        return None


async def cancel_call(runtime: Runtime, execution: Execution, by: str) -> Execution | None:
    """Cancel a call of the `tools` queue: a queued one ends `cancelled` without starting (audited)
    and its record is returned; a running one is flagged with who asked, then aborted on its worker
    (procrastinate abort), which stops it as them; None then (the caller waits for the record)."""
    calls = runtime.store.queue.calls
    if execution.status == ExecutionStatus.QUEUED:
        cancelled = await calls.cancel(execution.id, by)
        if cancelled is not None:
            await runtime.recorder.audit_outcome(cancelled)
            return cancelled
    # Flag first: the worker reads who asked when the abort reaches it.
    await runtime.executions.request_cancel(execution.id, by, utcnow())
    await calls.abort_job(execution.id)
    return None


def on_a_worker(execution: Execution) -> bool:
    """Whether `execution` is a call of the `tools` queue (queued, or running on a worker)."""
    return execution.status == ExecutionStatus.QUEUED or (
        execution.status == ExecutionStatus.RUNNING and execution.owner is None
    )


__all__ = ["NotQueued", "cancel_call", "on_a_worker", "queued_call_stack", "run_queued_call", "submit_call"]
