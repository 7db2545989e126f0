"""The execution record's writes: one write to admit a call, one to end it, group-committed.

Every governed call makes two writes:

- admission: the outer layers' hooks (the gate's API-key re-check, the limit counters), the
  `running` row and the `allow` audit row — or, when the call's run was cancelled meanwhile,
  a `cancelled` row and its outcome audit row, counting nothing. It commits before the call runs;
- outcome: the final row (with the per-tool totals) and the outcome audit row; the updates of a
  batch's outcomes run as one statement run (one round trip on PostgreSQL). It commits before
  the caller gets the outcome, unless the caller settles it later (`finish_later`: a BUILD step,
  whose run settles every step's record before it ends).

A refusal is one write of its own (the denied row and the `deny` audit row). The writes of
concurrent calls share transactions (`store.batch.GroupCommit`): each call's checks and counters
run in the batch's transaction, then the batch's new rows, row updates, totals and audit rows
are written at once, with one move of the audit chain's head, and the transaction commits; only
then does each call get its answer. No call's part needs a savepoint: a check refuses before it
writes, the limits give back what a refused call took (`Limits.consume`), and the update of a
row can only fail as a database error, which fails the batch (its writes are then tried alone).
Each write emits its lifecycle event on the bus once committed. The functions passed to the
batcher are the only place these statements are composed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from .._aio import others_ready
from .._evolve import evolve
from ..engine.audit import AuditEntry, AuditLog, spell_arguments
from ..engine.events import Event, EventBus, EventType
from ..errors import BudgetExceeded, RateLimited
from ..model.execution import Execution
from ..model.limits import LimitStatus
from ..model.redaction import redact, redact_text, remember_secrets
from ..model.spec import ToolResult
from ..model.status import AUDIT_OUTCOME_OF, AuditOutcome, CallStatus, ExecutionStatus
from ..policy import Decision
from ..settings import Settings
from ..store.batch import DEFAULT_MAX_SIZE, DEFAULT_WINDOW_S, GroupCommit
from ..store.db import Connection
from ..store.executions import ExecutionStore, Owner
from .base import CallContext, CallOutcome, ToolCall

if TYPE_CHECKING:
    from ..store.db import Database


#: `CallContext.via` of the MCP gateway's calls.
GATEWAY_VIA = "gateway"


def _under_agent(execution: Execution, reason: str | None) -> str | None:
    """`reason`, naming the agent a direct call was made under (its metadata's `agent`) and, for a
    call that came through the MCP gateway, the client and the digest of the tool list it was shown
    (its metadata's `gateway`)."""
    metadata = execution.metadata or {}
    agent = metadata.get("agent") if execution.run_id is None else None
    notes = [f"under agent {agent}"] if isinstance(agent, str) else []
    gateway = metadata.get("gateway")
    if isinstance(gateway, dict):
        notes.append(f"via gateway, client {gateway.get('client')}, tool list {gateway.get('toolList')}")
    if not notes:
        return reason
    return f"{reason} ({'; '.join(notes)})" if reason else "; ".join(notes)


def _masked_result(result: ToolResult | None) -> ToolResult | None:
    return None if result is None else ToolResult.from_json(redact(result.to_json()))


def answered(outcome: CallOutcome) -> CallOutcome:
    """`outcome` as a direct caller gets it (`tools call`, REST and tRPC `executeTool`,
    `Engine.execute`): its result, error and record masked as the stored record is
    (`model.execution.row_values`), so an answer never shows what the store does not hold.

    Only a BUILD step's outcome stays in clear, inside its run, which needs the real values for
    the next step; what the run stores and answers is masked too. Call it in the caller's task:
    the call's own secret values, remembered there when it was drafted, are masked as well.
    """
    record = outcome.record
    if record is not None:
        record = evolve(
            record,
            result=_masked_result(record.result),
            error=redact_text(record.error) if record.error else record.error,
            reason=redact_text(record.reason) if record.reason else record.reason,
        )
    return evolve(
        outcome,
        result=_masked_result(outcome.result),
        error=redact_text(outcome.error) if outcome.error else outcome.error,
        reason=redact_text(outcome.reason) if outcome.reason else outcome.reason,
        record=record,
    )


def decision_entry(execution: Execution, *, allowed: bool, reason: str | None = None) -> AuditEntry:
    """The audit row of the gate's verdict on `execution`."""
    return AuditEntry(
        principal=execution.user,
        api_key_id=execution.api_key_id,
        tool=execution.tool,
        risk=execution.risk,
        level=execution.level,
        decision="allow" if allowed else "deny",
        reason=_under_agent(execution, reason),
        arguments=execution.arguments,
        spelled_arguments=execution.audit_arguments,
        outcome=None if allowed else AuditOutcome.DENIED,
        started_at=execution.started_at,
        ended_at=None if allowed else execution.started_at,
        run_id=execution.run_id,
        execution_id=execution.id,
        event="decision",
    )


def outcome_entry(execution: Execution) -> AuditEntry:
    """The audit row of how `execution` ended."""
    return AuditEntry(
        principal=execution.user,
        api_key_id=execution.api_key_id,
        tool=execution.tool,
        risk=execution.risk,
        level=execution.level,
        reason=_under_agent(execution, execution.reason or execution.error),
        arguments=execution.arguments,
        spelled_arguments=execution.audit_arguments,
        outcome=AUDIT_OUTCOME_OF[execution.status],
        started_at=execution.started_at,
        ended_at=execution.ended_at,
        duration_ms=execution.duration_ms,
        run_id=execution.run_id,
        execution_id=execution.id,
        event="outcome",
    )


def _metadata(ctx: CallContext) -> dict[str, Any] | None:
    """The caller's metadata as stored (redacted), with `agent` when the call was made under one.

    `gateway` is the MCP gateway's own entry (`toolagent.gateway.server`), named in the audit
    rows: kept only on a call that came through the gateway, so no other caller can claim it."""
    metadata = dict(ctx.metadata) if ctx.metadata is not None else None
    if metadata is not None and ctx.via != GATEWAY_VIA:
        metadata.pop("gateway", None)
    if ctx.agent is not None:
        return {**redact(metadata or {}), "agent": ctx.agent}
    return redact(metadata) if metadata is not None else None


@dataclass(frozen=True)
class _Written:
    """What one call's write did, for the batch's shared part to finish."""

    value: Any = None
    """What the caller gets back."""
    rows: tuple[Execution, ...] = ()
    """New execution rows."""
    ended: tuple[Execution, ...] = ()
    """Executions that reached a final state (counted into the totals)."""
    entries: tuple[AuditEntry, ...] = ()
    """Audit rows, in order."""


@dataclass(eq=False)
class _Finish:
    """An outcome's row update, made by the batch's shared part with the batch's others in one
    statement run (one round trip on PostgreSQL)."""

    outcome: Execution
    stored: bool = False
    """Set by the shared part: the row was still running and now holds the outcome."""


@dataclass
class Recorder:
    """Writes executions and their audit rows, and tells the event bus."""

    db: Database
    executions: ExecutionStore
    audit: AuditLog | None
    events: EventBus
    owner: Owner | None
    """The process its rows name as running them; None for a worker's queued calls (its heartbeat says)."""
    window_s: float | None = None
    """How long a batch of concurrent writes waits for more (default 20 ms; the runtime passes
    `TOOLAGENT_COMMIT_WINDOW_MS`, see `batching_of`)."""
    batch_max: int | None = None
    """Most writes per transaction (default 64; the runtime passes `TOOLAGENT_COMMIT_BATCH_MAX`)."""
    writes: GroupCommit = field(init=False, repr=False)
    """The group commit every write of this recorder goes through."""
    calls_under_way: int = field(default=0, init=False)
    """Calls between their draft and their outcome in this process (`RecordedSource` counts them).
    A write made while no other call is under way and no other task is ready to run (one just
    started may be about to make a call) has no company to wait for: it commits without first
    letting the event loop take a turn; it waits for company only while other calls are under way
    (`GroupCommit`'s `crowd`)."""

    @classmethod
    def batching_of(cls, settings: Settings) -> tuple[float, int]:
        """The `window_s` and `batch_max` that `TOOLAGENT_COMMIT_WINDOW_MS` and
        `TOOLAGENT_COMMIT_BATCH_MAX` in `settings` set, else the defaults."""
        ms = settings.commit_window_ms
        return (DEFAULT_WINDOW_S if ms is None else ms / 1000, settings.commit_batch_max or DEFAULT_MAX_SIZE)

    def __post_init__(self) -> None:
        if self.window_s is None:
            self.window_s = DEFAULT_WINDOW_S
        if self.batch_max is None:
            self.batch_max = DEFAULT_MAX_SIZE
        self.writes = GroupCommit(
            self.db,
            window_s=self.window_s,
            max_size=self.batch_max,
            seal=self._seal,
            company=lambda: self.calls_under_way > 1 or others_ready(),
            crowd=lambda: self.calls_under_way > 1,
        )

    def _seal(self, conn: Connection, written: list[_Written]) -> None:
        """The batch's shared part: new rows, outcomes' updates, then totals, then the audit rows
        (one head move), in the order of the writes."""
        self.executions.insert_many_in(conn, [e for w in written for e in w.rows])
        finishes = [w.value for w in written if isinstance(w.value, _Finish)]
        if finishes:
            stored = self.executions.finish_many_in(conn, [f.outcome for f in finishes])
            for finish in finishes:
                finish.stored = finish.outcome.id in stored
        ended: list[Execution] = []
        entries: list[AuditEntry] = []
        for w in written:
            if isinstance(w.value, _Finish):
                if w.value.stored:  # else closed meanwhile by someone else: nothing of this call's
                    ended.append(w.value.outcome)
                    entries.append(outcome_entry(w.value.outcome))
            else:
                ended.extend(w.ended)
                entries.extend(w.entries)
        self.executions.add_totals_in(conn, ended)
        if self.audit is not None:
            self.audit.append_many_in(conn, entries)

    # -- the record of a call ---------------------------------------------------------------------

    def draft(self, call: ToolCall, ctx: CallContext) -> Execution:
        """The `running` record a call would get (not stored)."""
        principal, key = ctx.principal, ctx.api_key
        # The call's own secrets are masked wherever they come back (its result, its log lines).
        remember_secrets(call.arguments, ctx.metadata)
        arguments = redact(call.arguments)
        return Execution(
            id=call.execution_id,
            tool=call.name,
            category=call.entry.category,
            risk=call.entry.risk,
            status=ExecutionStatus.RUNNING,
            user=principal.name,
            started_at=datetime.fromtimestamp(call.started_s, UTC),
            level=principal.level,
            api_key_id=key.id if key is not None else None,
            session_id=ctx.session_id,
            run_id=ctx.run_id,
            metadata=_metadata(ctx),
            arguments=arguments,
            timeout_ms=call.timeout_ms,
            owner=self.owner,
            # Both of the call's audit rows hold this text: spelled once.
            audit_arguments=spell_arguments(arguments, redacted=True) if self.audit is not None else None,
        )

    # -- refusal ----------------------------------------------------------------------------------

    async def deny(self, execution: Execution, code: str, reason: str) -> Execution:
        """Record a refused call (denied, never sent) in one write; returns the record."""
        denied = replace(
            execution,
            status=ExecutionStatus.FAILED,
            denied=True,
            denial=code,
            reason=reason,
            error=reason,
            ended_at=execution.started_at,
        )
        with anyio.CancelScope(shield=True):
            # No statement of its own (the batch writes the row and the audit row): no savepoint.
            await self.writes.submit(
                self._record_in, denied, decision_entry(denied, allowed=False, reason=reason), savepoint=False
            )
            await self.emit("execution_denied", denied, status=CallStatus.DENIED, reason=reason)
        return denied

    @staticmethod
    def _record_in(conn: Connection, execution: Execution, entry: AuditEntry) -> _Written:
        return _Written(rows=(execution,), ended=(execution,), entries=(entry,))

    # -- admission --------------------------------------------------------------------------------

    async def admit(self, execution: Execution, hooks: Sequence[Any]) -> Execution | Decision:
        """In one write: run the hooks, then insert the call `running` and audit the decision —
        or, when its run was cancelled, record it `cancelled` without counting it.

        Each hook is a function of `(connection, execution)` run in the admission's transaction:
        it returns `LimitStatus`es counted, a `Decision` (a refusal ends the admission with
        nothing written), or raises `RateLimited` / `BudgetExceeded` having written nothing (the
        limits give back what they took). The transaction is shared with other calls' writes and
        has no savepoint for this one: any other exception fails the whole batch.

        Returns:
            The execution as recorded (with the limits counted), or a hook's refusal.

        Raises:
            RateLimited, BudgetExceeded: a limit refused (nothing was written).
        """
        # The admission's value: the execution, a hook's refusal, or the limit error it raised.
        admitted: Execution | Decision | RateLimited | BudgetExceeded = (
            await self.writes.submit(self._admit_in, execution, tuple(hooks), savepoint=False)
        ).value
        if isinstance(admitted, (RateLimited, BudgetExceeded)):
            raise admitted
        if isinstance(admitted, Execution) and admitted.status == ExecutionStatus.CANCELLED:
            with anyio.CancelScope(shield=True):
                await self.emit(
                    "execution_cancelled", admitted, status=ExecutionStatus.CANCELLED, reason=admitted.reason
                )
        return admitted

    def _admit_in(self, conn: Connection, execution: Execution, hooks: tuple[Any, ...]) -> _Written:
        counted: list[LimitStatus] = []
        by = None if execution.run_id is None else self.executions.run_cancelled_by(conn, execution.run_id)
        if by is not None:
            cancelled = replace(
                execution,
                status=ExecutionStatus.CANCELLED,
                ended_at=execution.started_at,
                reason=f"run {execution.run_id} was cancelled by {by}",
            )
            return _Written(cancelled, rows=(cancelled,), ended=(cancelled,), entries=(outcome_entry(cancelled),))
        for hook in hooks:
            try:
                verdict = hook(conn, execution)
            except (RateLimited, BudgetExceeded) as refused:
                return _Written(refused)  # raised to the caller by `admit`, outside the transaction
            if isinstance(verdict, Decision):
                if not verdict.allowed:
                    return _Written(verdict)
            elif verdict:
                counted.extend(verdict)
        return _Written(
            evolve(execution, limits=tuple(counted)),
            rows=(execution,),
            entries=(decision_entry(execution, allowed=True),),
        )

    # -- outcome ----------------------------------------------------------------------------------

    async def finish(self, outcome: Execution) -> Execution:
        """Store the final record in one write (shielded) and emit its event.

        Returns:
            The record as stored: `outcome`, or the row as someone else closed it meanwhile.
        """
        return await self.finish_later(outcome)()

    def finish_later(self, outcome: Execution) -> Callable[[], Awaitable[Execution]]:
        """Queue the final record's write for the next batch and return what waits for it: `finish`
        once awaited. Until then the write rides with whichever batch commits next (the next call's
        admission, typically), so a caller that goes on at once shares that commit."""
        # The batch's shared part updates the row (one statement run for the batch's outcomes):
        # it can only fail as a database error, which fails the batch.
        write = self.writes.defer(self._finish_in, outcome, savepoint=False)

        async def settle() -> Execution:
            with anyio.CancelScope(shield=True):
                if not (await self.writes.settle(write)).value.stored:
                    # Closed meanwhile by someone else (a process that took this one for dead).
                    return await self.executions.get(outcome.id) or outcome
                kind: EventType = (
                    "execution_cancelled" if outcome.status == ExecutionStatus.CANCELLED else "execution_finished"
                )
                await self.emit(
                    kind,
                    outcome,
                    status=outcome.status,
                    duration_ms=outcome.duration_ms,
                    reason=outcome.reason or outcome.error,
                )
            return outcome

        return settle

    @staticmethod
    def _finish_in(conn: Connection, outcome: Execution) -> _Written:
        return _Written(_Finish(outcome))

    async def audit_outcome(self, execution: Execution) -> None:
        """Append the outcome audit row of an execution closed outside a call (orphans, dead owners)."""
        if self.audit is not None:
            await self.audit.append(outcome_entry(execution))

    # -- helpers ----------------------------------------------------------------------------------

    async def emit(self, kind: EventType, execution: Execution, **extra: Any) -> None:
        """Emit a lifecycle event about `execution` (unless no subscriber wants it)."""
        if not self.events.wants(kind, extra.get("status")):
            return
        await self.events.emit(
            Event(
                kind,
                execution_id=execution.id,
                run_id=execution.run_id,
                tool=execution.tool,
                user=execution.user,
                data={
                    "category": execution.category,
                    "risk": execution.risk,
                    "level": execution.level,
                    "apiKeyId": execution.api_key_id,
                    "sessionId": execution.session_id,
                    "timeoutMs": execution.timeout_ms,
                },
                **extra,
            )
        )


__all__ = ["Recorder", "answered", "decision_entry", "outcome_entry"]
