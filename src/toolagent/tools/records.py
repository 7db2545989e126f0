"""The execution record's writes: one transaction to admit a call, one to end it.

Every governed call costs exactly two synchronous transactions through `Database.write`:

- admission: the outer layers' hooks (the gate's API-key re-check, the limit counters), the
  `running` row and the `allow` audit row — or, when the call's run was cancelled meanwhile,
  a `cancelled` row and its outcome audit row, counting nothing;
- outcome: the final row (with the per-tool totals) and the outcome audit row.

A refusal is one transaction of its own (the denied row and the `deny` audit row). Each write
emits its lifecycle event on the bus once committed. The functions passed to `Database.write`
are the only place these statements are composed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import anyio

from ..engine.audit import AuditEntry, AuditLog
from ..engine.events import Event, EventBus
from ..engine.executions import Execution, ExecutionStore, Owner
from ..engine.limits import LimitStatus
from ..engine.permissions import Decision
from ..engine.redaction import redact, remember_secrets
from ..status import ExecutionStatus
from ..store.db import Connection
from .base import CallContext, ToolCall

if TYPE_CHECKING:
    from ..store.db import Database


def _under_agent(execution: Execution, reason: str | None) -> str | None:
    """`reason`, naming the agent a direct call was made under (its metadata's `agent`)."""
    agent = (execution.metadata or {}).get("agent") if execution.run_id is None else None
    if not isinstance(agent, str):
        return reason
    return f"{reason} (under agent {agent})" if reason else f"under agent {agent}"


def decision_entry(execution: Execution, *, allowed: bool, reason: str | None = None) -> AuditEntry:
    """The audit row of the gate's verdict on `execution`."""
    return AuditEntry(
        principal=execution.user, api_key_id=execution.api_key_id, tool=execution.tool, risk=execution.risk,
        level=execution.level, decision="allow" if allowed else "deny", reason=_under_agent(execution, reason),
        arguments=execution.arguments,
        outcome=None if allowed else "denied", started_at=execution.started_at,
        ended_at=None if allowed else execution.started_at, run_id=execution.run_id, execution_id=execution.id,
        event="decision",
    )


def outcome_entry(execution: Execution) -> AuditEntry:
    """The audit row of how `execution` ended."""
    return AuditEntry(
        principal=execution.user, api_key_id=execution.api_key_id, tool=execution.tool, risk=execution.risk,
        level=execution.level, reason=_under_agent(execution, execution.reason or execution.error),
        arguments=execution.arguments,
        outcome=execution.status,  # type: ignore[arg-type]
        started_at=execution.started_at, ended_at=execution.ended_at, duration_ms=execution.duration_ms,
        run_id=execution.run_id, execution_id=execution.id, event="outcome",
    )


def _metadata(ctx: CallContext) -> dict[str, Any] | None:
    """The caller's metadata as stored (redacted), with `agent` when the call was made under one."""
    if ctx.agent is not None:
        return {**redact(dict(ctx.metadata or {})), "agent": ctx.agent}
    return redact(dict(ctx.metadata)) if ctx.metadata is not None else None


@dataclass
class Recorder:
    """Writes executions and their audit rows, and tells the event bus."""

    db: Database
    executions: ExecutionStore
    audit: AuditLog | None
    events: EventBus
    owner: Owner

    # -- the record of a call ---------------------------------------------------------------------

    def draft(self, call: ToolCall, ctx: CallContext) -> Execution:
        """The `running` record a call would get (not stored)."""
        principal, key = ctx.principal, ctx.api_key
        # The call's own secrets are masked wherever they come back (its result, its log lines).
        remember_secrets(call.arguments, ctx.metadata)
        return Execution(
            id=call.execution_id, tool=call.name, category=call.entry.category, risk=call.entry.risk,
            status=ExecutionStatus.RUNNING, user=principal.name, started_at=datetime.fromtimestamp(call.started_s, UTC),
            level=principal.level, api_key_id=key.id if key is not None else None, session_id=ctx.session_id,
            run_id=ctx.run_id, metadata=_metadata(ctx),
            arguments=redact(call.arguments), timeout_ms=call.timeout_ms, owner=self.owner,
        )

    # -- refusal ----------------------------------------------------------------------------------

    async def deny(self, execution: Execution, code: str, reason: str) -> Execution:
        """Record a refused call (denied, never sent) in one transaction; returns the record."""
        denied = replace(execution, status=ExecutionStatus.FAILED, denied=True, denial=code, reason=reason,
                         error=reason, ended_at=execution.started_at)
        with anyio.CancelScope(shield=True):
            await self.db.write(self._record_in, denied, decision_entry(denied, allowed=False, reason=reason))
            await self.emit("execution_denied", denied, status="denied", reason=reason)
        return denied

    def _record_in(self, conn: Connection, execution: Execution, entry: AuditEntry) -> None:
        self.executions.insert(conn, execution)
        self._audit_in(conn, entry)

    # -- admission --------------------------------------------------------------------------------

    async def admit(self, execution: Execution, hooks: Sequence[Any]) -> Execution | Decision:
        """In one transaction: run the hooks, then insert the call `running` and audit the decision —
        or, when its run was cancelled, record it `cancelled` without counting it.

        Returns:
            The execution as recorded (with the limits counted), or a hook's refusal.

        Raises:
            RateLimited, BudgetExceeded: a limit refused (nothing was written).
        """
        admitted = await self.db.write(self._admit_in, execution, tuple(hooks))
        if isinstance(admitted, Execution) and admitted.status == ExecutionStatus.CANCELLED:
            with anyio.CancelScope(shield=True):
                await self.emit("execution_cancelled", admitted, status="cancelled", reason=admitted.reason)
        return admitted

    def _admit_in(self, conn: Connection, execution: Execution, hooks: tuple[Any, ...]) -> Execution | Decision:
        counted: list[LimitStatus] = []
        by = None if execution.run_id is None else self.executions.run_cancelled_by(conn, execution.run_id)
        if by is not None:
            cancelled = replace(execution, status=ExecutionStatus.CANCELLED, ended_at=execution.started_at,
                                reason=f"run {execution.run_id} was cancelled by {by}")
            self.executions.insert(conn, cancelled)
            self._audit_in(conn, outcome_entry(cancelled))
            return cancelled
        for hook in hooks:
            verdict = hook(conn, execution)
            if isinstance(verdict, Decision):
                if not verdict.allowed:
                    return verdict
            elif verdict:
                counted.extend(verdict)
        self.executions.insert(conn, execution)
        self._audit_in(conn, decision_entry(execution, allowed=True))
        return replace(execution, limits=tuple(counted))

    # -- outcome ----------------------------------------------------------------------------------

    async def finish(self, outcome: Execution) -> Execution:
        """Store the final record in one transaction (shielded) and emit its event.

        Returns:
            The record as stored: `outcome`, or the row as someone else closed it meanwhile.
        """
        with anyio.CancelScope(shield=True):
            wrote = await self.db.write(self._finish_in, outcome)
            if not wrote:
                # Closed meanwhile by someone else (a process that took this one for dead).
                return await self.executions.get(outcome.id) or outcome
            kind = "execution_cancelled" if outcome.status == ExecutionStatus.CANCELLED else "execution_finished"
            await self.emit(kind, outcome, status=outcome.status, duration_ms=outcome.duration_ms,
                            reason=outcome.reason or outcome.error)
        return outcome

    def _finish_in(self, conn: Connection, outcome: Execution) -> bool:
        if not self.executions.finish_in(conn, outcome):
            return False
        self._audit_in(conn, outcome_entry(outcome))
        return True

    async def audit_outcome(self, execution: Execution) -> None:
        """Append the outcome audit row of an execution closed outside a call (orphans, dead owners)."""
        if self.audit is not None:
            await self.audit.append(outcome_entry(execution))

    # -- helpers ----------------------------------------------------------------------------------

    def _audit_in(self, conn: Connection, entry: AuditEntry) -> None:
        if self.audit is not None:
            self.audit.append_in(conn, entry)

    async def emit(self, kind: str, execution: Execution, **extra: Any) -> None:
        """Emit a lifecycle event about `execution`."""
        await self.events.emit(Event(
            kind,  # type: ignore[arg-type]
            execution_id=execution.id, run_id=execution.run_id, tool=execution.tool, user=execution.user,
            data={"category": execution.category, "risk": execution.risk, "level": execution.level,
                  "apiKeyId": execution.api_key_id, "sessionId": execution.session_id, "timeoutMs": execution.timeout_ms},
            **extra,
        ))


__all__ = ["Recorder", "decision_entry", "outcome_entry"]
