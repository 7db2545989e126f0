"""Store verbs for async tool calls submitted to the workers (the `tools` queue). PostgreSQL only.

A submitted call is an `executions` row in status `queued` (redacted like any other: arguments,
metadata), its raw arguments and metadata in `queued_inputs`, and a `tools` job whose argument is
the execution id, all written in one transaction. A worker admits it through the tool stack,
which replaces the `queued` row by the `running` one in the admission transaction (see
`workers/calls.py`); cancelling it before that ends it `cancelled` without starting. Every way
the call ends deletes its raw inputs in the same transaction as its final state, or right after
(a call the worker ran: when its job ends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa

from ..model.execution import Execution, row_values
from ..model.status import ExecutionStatus
from ..model.times import as_utc
from . import engine_tables as et
from . import tables as t
from .db import Database, utcnow
from .executions import ExecutionStore

#: The queue of single asynchronous tool calls and the task that runs one (argument: the execution id).
TOOLS_QUEUE, CALL_TASK = "tools", "toolagent.call"

_DEFER = sa.text(
    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(:queue, :task, 0, NULL, NULL, CAST(:args AS jsonb), NULL)"
    "::procrastinate_job_to_defer_v1])) AS id"
)
_CANCEL = sa.text("SELECT procrastinate_cancel_job_v1(:job_id, :abort, false)")
_JOB_OF = sa.text(
    "SELECT id FROM procrastinate_jobs WHERE task_name = :task AND args->>'execution_id' = :id "
    "AND status IN ('todo', 'doing') ORDER BY id DESC LIMIT 1"
)
_FINISH = sa.text("SELECT procrastinate_finish_job_v1(:job_id, CAST(:status AS procrastinate_job_status), false)")
_JOB_LIVE = sa.text("SELECT status::text FROM procrastinate_jobs WHERE id = :job_id FOR UPDATE")
_T = et.executions
_Q = t.queued_inputs


async def fail_job_in(conn: Any, job_id: int) -> None:
    """Mark a job still waiting or running `failed` (inside the caller's transaction)."""
    status = await conn.scalar(_JOB_LIVE, {"job_id": job_id})
    if status in ("todo", "doing"):
        await conn.execute(_FINISH, {"job_id": job_id, "status": "failed"})


@dataclass(frozen=True)
class QueuedCall:
    """A call a worker is about to admit: the stored execution and its raw inputs."""

    execution: Execution
    """The `queued` row (redacted)."""
    arguments: dict[str, Any]
    """The arguments as the caller sent them."""
    metadata: dict[str, Any] | None
    """The caller's metadata as sent."""
    agent: str | None = None
    """The agent (`org/slug`) the call is made under: its tool list and security block apply."""


class QueuedCallStore:
    """Async tool calls waiting for (or run by) a worker."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._totals = ExecutionStore(db)

    async def submit(
        self, execution: Execution, arguments: dict[str, Any], metadata: dict[str, Any] | None, agent: str | None = None
    ) -> int:
        """Store `execution` (status `queued`) redacted, its raw inputs (and the agent it is made
        under), and defer its `tools` job, in one transaction; returns the job id."""
        now = utcnow()
        data = {"arguments": arguments, "metadata": metadata, "agent": agent}
        async with self.db.begin() as conn:
            await conn.execute(_T.insert().values(**row_values(execution)))
            await conn.execute(_Q.insert().values(id=execution.id, data=data, created_at=now))
            return await self._defer(conn, execution.id)

    @staticmethod
    async def _defer(conn: Any, execution_id: str) -> int:
        return int(
            (
                await conn.execute(
                    _DEFER,
                    {"queue": TOOLS_QUEUE, "task": CALL_TASK, "args": json.dumps({"execution_id": execution_id})},
                )
            ).scalar_one()
        )

    async def get(self, execution_id: str) -> QueuedCall | None:
        """The call, if it is still `queued` and its inputs are stored."""
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    sa.select(_T, _Q.c.data.label("queued_data"))
                    .join_from(_T, _Q, _Q.c.id == _T.c.id)
                    .where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
                )
            ).first()
        if row is None:
            return None
        data = row.queued_data or {}
        return QueuedCall(
            Execution.from_row(row), dict(data.get("arguments") or {}), data.get("metadata"), data.get("agent")
        )

    @staticmethod
    def take_in(conn: sa.Connection, execution_id: str) -> bool:
        """Inside the admission transaction: remove the `queued` row so the `running` one can take its
        id; False when it is not queued any more (cancelled meanwhile, or admitted by another job)."""
        return bool(
            conn.execute(
                _T.delete().where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
            ).rowcount
        )

    @staticmethod
    def replace_queued_in(conn: sa.Connection, ids: list[str]) -> set[str]:
        """Inside a batch's insert: remove the `queued` rows of `ids`, so the rows being written can
        take their ids; returns the ids whose row stays (not queued any more: cancelled meanwhile)."""
        if not ids:
            return set()
        conn.execute(_T.delete().where(_T.c.id.in_(ids) & (_T.c.status == ExecutionStatus.QUEUED)))
        return set(conn.scalars(sa.select(_T.c.id).where(_T.c.id.in_(ids))))

    async def cancel(self, execution_id: str, by: str) -> Execution | None:
        """End a call that has not started `cancelled` (counted in the totals), cancel its job and
        drop its inputs, in one transaction; None when it is not queued."""
        now = utcnow()
        reason = f"cancelled by {by} before it started"
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    _T.update()
                    .where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
                    .values(status=ExecutionStatus.CANCELLED, ended_at=now, reason=reason)
                    .returning(*_T.c)
                )
            ).first()
            if row is None:
                return None
            cancelled = Execution.from_row(row)
            await conn.run_sync(lambda sync: self._totals.add_totals_in(sync, [cancelled]))
            job_id = await conn.scalar(_JOB_OF, {"task": CALL_TASK, "id": execution_id})
            if job_id is not None:
                await conn.execute(_CANCEL, {"job_id": job_id, "abort": False})
            await conn.execute(_Q.delete().where(_Q.c.id == execution_id))
        return cancelled

    async def close_unstarted(self, execution_id: str, error: str) -> Execution | None:
        """End a queued call that cannot start (its user, key or tool is gone) `failed` with `error`,
        and drop its inputs, in one transaction; None when it is not queued."""
        now = utcnow()
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    _T.update()
                    .where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
                    .values(status=ExecutionStatus.FAILED, ended_at=now, error=error)
                    .returning(*_T.c)
                )
            ).first()
            failed = Execution.from_row(row) if row is not None else None
            if failed is not None:
                await conn.run_sync(lambda sync: self._totals.add_totals_in(sync, [failed]))
            await conn.execute(_Q.delete().where(_Q.c.id == execution_id))
        return failed

    async def abort_job(self, execution_id: str) -> bool:
        """Ask the worker running a call's job to stop it (procrastinate abort); False when no job of
        the call is waiting or running."""
        async with self.db.begin() as conn:
            job_id = await conn.scalar(_JOB_OF, {"task": CALL_TASK, "id": execution_id})
            if job_id is None:
                return False
            return (await conn.execute(_CANCEL, {"job_id": job_id, "abort": True})).scalar() is not None

    async def requeue(self, execution: Execution, job_id: int) -> int | None:
        """Put a call of a stopped worker back in the queue (only for a tool safe to repeat): its
        row back to `queued` as submitted, the old job failed and a new one deferred, in one
        transaction; None when the call ended meanwhile or its inputs are gone."""
        async with self.db.begin() as conn:
            if await conn.scalar(sa.select(_Q.c.id).where(_Q.c.id == execution.id)) is None:
                return None
            updated = (
                await conn.execute(
                    _T.update()
                    .where((_T.c.id == execution.id) & (_T.c.status == ExecutionStatus.RUNNING))
                    .values(
                        status=ExecutionStatus.QUEUED,
                        owner_pid=None,
                        owner_host=None,
                        owner_boot=None,
                        cancel_requested_by=None,
                        cancel_requested_at=None,
                    )
                )
            ).rowcount
            if not updated:
                return None
            await fail_job_in(conn, job_id)
            return await self._defer(conn, execution.id)

    async def redefer(self, execution_id: str, job_id: int) -> int | None:
        """A call still `queued` whose job a stopped worker had fetched but not admitted: fail that
        job and defer a new one, in one transaction; None when it is not queued any more."""
        async with self.db.begin() as conn:
            queued = await conn.scalar(
                sa.select(_T.c.id)
                .where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
                .with_for_update()
            )
            await fail_job_in(conn, job_id)
            return await self._defer(conn, execution_id) if queued is not None else None

    async def close(self, execution_id: str, job_id: int, error: str) -> Execution | None:
        """End a call of a stopped worker `failed` with `error` (reason `interrupted`), fail its job
        and drop its inputs, in one transaction; None when it was not running or queued any more."""
        now = utcnow()
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    _T.select()
                    .where(
                        (_T.c.id == execution_id) & _T.c.status.in_([ExecutionStatus.RUNNING, ExecutionStatus.QUEUED])
                    )
                    .with_for_update()
                )
            ).first()
            closed = None
            if row is not None:
                current = Execution.from_row(row)
                started = as_utc(current.started_at) or now
                closed = replace(
                    current,
                    status=ExecutionStatus.FAILED,
                    ended_at=now,
                    reason="interrupted",
                    error=error,
                    duration_ms=max(0.0, (now - started).total_seconds() * 1000),
                )
                await conn.execute(
                    _T.update()
                    .where(_T.c.id == execution_id)
                    .values(
                        status=closed.status,
                        ended_at=now,
                        reason=closed.reason,
                        error=error,
                        duration_ms=closed.duration_ms,
                    )
                )
                ended = closed
                await conn.run_sync(lambda sync: self._totals.add_totals_in(sync, [ended]))
            await conn.execute(_Q.delete().where(_Q.c.id == execution_id))
            await fail_job_in(conn, job_id)
        return closed

    async def drop_inputs(self, execution_id: str) -> None:
        """Delete a call's raw inputs once its job ended, unless the call is `queued` again (a reaper
        put it back in the queue, taking the worker that ran it for dead)."""
        queued_again = sa.exists().where((_T.c.id == execution_id) & (_T.c.status == ExecutionStatus.QUEUED))
        async with self.db.begin() as conn:
            await conn.execute(_Q.delete().where((_Q.c.id == execution_id) & ~queued_again))


__all__ = ["CALL_TASK", "TOOLS_QUEUE", "QueuedCall", "QueuedCallStore", "fail_job_in"]
