"""Store verbs for runs submitted to the workers, and reads of procrastinate's job queue.

A submitted run (or async tool call) is inserted `queued` and its job deferred in the same
transaction, through procrastinate's own SQL function (`procrastinate_defer_jobs_v1`, applied by
migration 7): a rollback leaves neither, and a worker never sees a job whose run is not stored.
Claiming, cancelling and closing a run change the run and its job together too. PostgreSQL only.

No secret at rest where people look: the `runs` and `executions` rows of a queued run or call
hold the redacted form, as for any other, and a job's argument is only the id. The raw values a
worker runs with (plan, payload, arguments, metadata) are kept in `queued_inputs` and deleted in
the transaction that ends the run or call, whichever way it ends (finished, cancelled before it
started, closed by the reaper); a run or call the reaper puts back in the queue keeps them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..errors import UsageError
from ..model.execution import INTERRUPTED
from ..model.owner import Owner
from ..model.redaction import redact_values
from ..model.status import ExecutionStatus, RunStatus, StepStatus
from ..model.times import as_utc
from . import engine_tables as et
from . import tables as t
from .db import Database, utcnow
from .queued_calls import CALL_TASK, TOOLS_QUEUE, QueuedCallStore, fail_job_in
from .runs import _RUN_DATA, _RUN_TEXT, RunRow, RunStore, _row

#: The queue of BUILD runs and the task that runs one (argument: the run id).
BUILDS_QUEUE, BUILD_TASK = "builds", "toolagent.build"
#: Run columns redacted on a queued run: the shown ones, and the plan (its definition carries the
#: overrides merged in) and the caller's metadata.
_QUEUED_RUN_DATA = (*_RUN_DATA, "plan", "run_metadata")
_EXECUTIONS = et.executions
_FINAL_JOB_STATUSES = ("succeeded", "failed", "cancelled", "aborted")

_DEFER = sa.text(
    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(:queue, :task, 0, NULL, NULL, CAST(:args AS jsonb), NULL)"
    "::procrastinate_job_to_defer_v1])) AS id"
)
_CANCEL = sa.text("SELECT procrastinate_cancel_job_v1(:job_id, :abort, false)")


@dataclass(frozen=True)
class QueueCount:
    """How many jobs of one queue are in one status."""

    queue: str
    status: str
    count: int


@dataclass(frozen=True)
class JobRow:
    """One procrastinate job."""

    id: int
    queue: str
    task: str
    status: str
    args: dict[str, Any]
    attempts: int
    worker_id: int | None
    scheduled_at: datetime | None

    def to_json(self) -> dict[str, Any]:
        """API/CLI form."""
        return {
            "id": self.id,
            "queue": self.queue,
            "task": self.task,
            "status": self.status,
            "args": self.args,
            "attempts": self.attempts,
            "workerId": self.worker_id,
            "scheduledAt": self.scheduled_at.isoformat() if self.scheduled_at else None,
        }


class QueueStore:
    """Queued runs and the job queue beside them."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.calls = QueuedCallStore(db)
        """Async tool calls on the `tools` queue."""

    def _require_postgres(self) -> None:
        if self.db.is_sqlite:
            raise UsageError(
                "workers need PostgreSQL: set TOOLAGENT_DATABASE_URL (or --db) to a "
                "postgresql://USER@HOST/DB store; with SQLite runs execute in this process"
            )

    # -- submitting, claiming, cancelling ----------------------------------------------------------

    async def submit_run(self, *, steps: list[dict[str, Any]], inputs: dict[str, Any], **values: Any) -> int:
        """Insert a run `queued` (its steps `pending`), its raw inputs, and defer its job, in one transaction.

        Args:
            steps: `position` and `tool` of each step.
            inputs: What the worker runs with, unredacted (`plan`, `payload`, `metadata`).
            **values: The run's columns (`id`, agent, `plan`, `principal`, `api_key_id`, `payload`...),
                stored redacted.

        Returns:
            The procrastinate job id.
        """
        self._require_postgres()
        now = utcnow()
        values = redact_values(values, data=_QUEUED_RUN_DATA, text=_RUN_TEXT)
        async with self.db.begin() as conn:
            await conn.execute(t.runs.insert().values(status=RunStatus.QUEUED, queued_at=now, started_at=now, **values))
            if steps:
                await conn.execute(
                    t.run_steps.insert(), [{"run_id": values["id"], "status": StepStatus.PENDING, **s} for s in steps]
                )
            await conn.execute(t.queued_inputs.insert().values(id=values["id"], data=inputs, created_at=now))
            job_id = await self._defer(conn, values["id"])
        return job_id

    async def _defer(self, conn: Any, run_id: str) -> int:
        job_id = int(
            (
                await conn.execute(
                    _DEFER, {"queue": BUILDS_QUEUE, "task": BUILD_TASK, "args": json.dumps({"run_id": run_id})}
                )
            ).scalar_one()
        )
        await conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(job_id=job_id))
        return job_id

    async def drop_inputs(self, key: str) -> None:
        """Delete the raw inputs of a run or call that ended (nothing when there are none)."""
        async with self.db.begin() as conn:
            await conn.execute(t.queued_inputs.delete().where(t.queued_inputs.c.id == key))

    async def drop_run_inputs(self, run_id: str) -> None:
        """Delete the raw inputs of a run whose job ended, unless the run is `queued` again (a reaper
        put it back in the queue, taking the worker that ran it for dead)."""
        q = t.queued_inputs.c
        queued_again = sa.exists().where((t.runs.c.id == run_id) & (t.runs.c.status == RunStatus.QUEUED))
        async with self.db.begin() as conn:
            await conn.execute(t.queued_inputs.delete().where((q.id == run_id) & ~queued_again))

    async def claim_run(self, run_id: str, *, worker: str, host: str, owner: Owner | None = None) -> RunRow | None:
        """Move a `queued` run to `running` for this worker; None when it is not queued any more
        (cancelled before it started, or already claimed)."""
        me = owner or Owner.current()
        c = t.runs.c
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    t.runs.update()
                    .where((c.id == run_id) & (c.status == RunStatus.QUEUED))
                    .values(
                        status=RunStatus.RUNNING,
                        started_at=utcnow(),
                        worker=worker,
                        worker_host=host,
                        owner_pid=me.pid,
                        owner_host=me.host,
                        owner_boot=me.boot,
                    )
                    .returning(*t.runs.c)
                )
            ).first()
        return _row(RunRow, row) if row is not None else None

    async def queued_plan(self, run_id: str) -> dict[str, Any]:
        """What a worker needs to run a claimed run: plan, principal, key, payload, metadata (the
        plan, payload and metadata unredacted, from `queued_inputs`).

        Raises:
            UsageError: the run's inputs are gone (it ended, or was submitted by a release that
                kept them elsewhere).
        """
        c, q = t.runs.c, t.queued_inputs.c
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    sa.select(c.principal, c.api_key_id, c.user_id, c.queued_at, q.data)
                    .join_from(t.runs, t.queued_inputs, q.id == c.id, isouter=True)
                    .where(c.id == run_id)
                )
            ).one()
        if row.data is None:
            raise UsageError(f"run {run_id} has no stored inputs any more; submit it again")
        return {
            "principal": row.principal,
            "api_key_id": row.api_key_id,
            "user_id": row.user_id,
            "queued_at": row.queued_at,
            "plan": row.data["plan"],
            "payload": row.data.get("payload") or {},
            "run_metadata": row.data.get("metadata"),
        }

    async def cancel_queued_run(self, run_id: str, by: str) -> bool:
        """End a run that has not started `cancelled`, and cancel its job; False when it is not queued."""
        c = t.runs.c
        now = utcnow()
        error = f"cancelled by {by} before it started"
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    t.runs.update()
                    .where((c.id == run_id) & (c.status == RunStatus.QUEUED))
                    .values(status=RunStatus.CANCELLED, error=error, ended_at=now, duration_ms=0.0)
                    .returning(c.job_id)
                )
            ).first()
            if row is None:
                return False
            s = t.run_steps.c
            await conn.execute(
                t.run_steps.update()
                .where(s.run_id == run_id)
                .values(status=StepStatus.CANCELLED, error="run cancelled before it started")
            )
            if row.job_id is not None:
                await conn.execute(_CANCEL, {"job_id": row.job_id, "abort": False})
            await RunStore._save_interrupted_deliverable(conn, run_id, error, now)
            await conn.execute(t.queued_inputs.delete().where(t.queued_inputs.c.id == run_id))
        return True

    async def abort_job(self, run_id: str) -> bool:
        """Ask the worker running a run's job to cancel it now (procrastinate abort: the worker
        cancels the job's task on the notification); False when the run has no running job."""
        async with self.db.begin() as conn:
            job_id = await conn.scalar(sa.select(t.runs.c.job_id).where(t.runs.c.id == run_id))
            if job_id is None:
                return False
            return (await conn.execute(_CANCEL, {"job_id": job_id, "abort": True})).scalar() is not None

    # -- dead workers ------------------------------------------------------------------------------

    async def run_of_job(self, job_id: int) -> RunRow | None:
        """The run a job runs, if any."""
        async with self.db.begin() as conn:
            row = (await conn.execute(sa.select(t.runs).where(t.runs.c.job_id == job_id))).first()
        return _row(RunRow, row) if row is not None else None

    async def started_tools(self, run_id: str) -> tuple[list[str], str | None]:
        """The tools a run had called or started calling, and the one whose outcome is unknown.

        Read from its steps and from its executions: step records are written behind the steps
        (a worker killed a few milliseconds after a call left may not have stored its step as
        running yet), while an execution row is committed `running` before its tool is called.
        """
        s, e = t.run_steps.c, _EXECUTIONS.c
        async with self.db.begin() as conn:
            rows = (
                await conn.execute(sa.select(s.tool, s.status).where(s.run_id == run_id).order_by(s.position))
            ).all()
            calls = (
                await conn.execute(
                    sa.select(e.tool, e.status, e.reason)
                    .where((e.run_id == run_id) & ~e.denied)
                    .order_by(e.started_at, e.id)
                )
            ).all()
        started = [r.tool for r in rows if r.status not in (StepStatus.PENDING, StepStatus.SKIPPED)]
        started += [c.tool for c in calls if c.tool not in started]
        running = next((r.tool for r in rows if r.status == StepStatus.RUNNING), None) or next(
            (c.tool for c in reversed(calls) if c.status == StepStatus.RUNNING or c.reason == INTERRUPTED), None
        )
        return started, running

    async def close_stalled_run(self, run_id: str, job_id: int, error: str) -> bool:
        """Close a run of a stopped worker `failed` with `error` (running step `failed`, the rest
        `skipped`, a deliverable saying so) and fail its job, in one transaction; False when the
        run was not running any more."""
        c, s = t.runs.c, t.run_steps.c
        now = utcnow()
        async with self.db.begin() as conn:
            started = await conn.scalar(
                sa.select(c.started_at).where((c.id == run_id) & (c.status == RunStatus.RUNNING)).with_for_update()
            )
            if started is None:
                await self._fail_job(conn, job_id)
                return False
            started = as_utc(started)
            await conn.execute(
                t.runs.update()
                .where(c.id == run_id)
                .values(
                    status=RunStatus.FAILED,
                    error=error,
                    ended_at=now,
                    duration_ms=(now - started).total_seconds() * 1000 if started else None,
                )
            )
            await conn.execute(
                t.run_steps.update()
                .where((s.run_id == run_id) & (s.status == StepStatus.RUNNING))
                .values(status=StepStatus.FAILED, error=error, ended_at=now)
            )
            # A step whose call was admitted but whose record was not written yet (write-behind)
            # ended the same way: its outcome is unknown too.
            e = _EXECUTIONS.c
            unknown = sa.select(e.tool).where(
                (e.run_id == run_id) & ~e.denied & ((e.status == ExecutionStatus.RUNNING) | (e.reason == INTERRUPTED))
            )
            await conn.execute(
                t.run_steps.update()
                .where((s.run_id == run_id) & (s.status == StepStatus.PENDING) & s.tool.in_(unknown))
                .values(status=StepStatus.FAILED, error=error, ended_at=now)
            )
            await conn.execute(
                t.run_steps.update()
                .where((s.run_id == run_id) & (s.status == StepStatus.PENDING))
                .values(status=StepStatus.SKIPPED)
            )
            await RunStore._save_interrupted_deliverable(conn, run_id, error, now)
            await conn.execute(t.queued_inputs.delete().where(t.queued_inputs.c.id == run_id))
            await self._fail_job(conn, job_id)
        return True

    async def requeue_run(self, run_id: str, job_id: int) -> int | None:
        """Put a run of a stopped worker back in the queue from its first step (only for runs whose
        every started call was safe to repeat), failing the old job and deferring a new one in one
        transaction; returns the new job id (None when the run was not running any more)."""
        c, s = t.runs.c, t.run_steps.c
        async with self.db.begin() as conn:
            updated = (
                await conn.execute(
                    t.runs.update()
                    .where((c.id == run_id) & (c.status == RunStatus.RUNNING))
                    .values(status=RunStatus.QUEUED, worker=None, worker_host=None, owner_pid=None)
                )
            ).rowcount
            if not updated:
                await self._fail_job(conn, job_id)
                return None
            await conn.execute(
                t.run_steps.update()
                .where(s.run_id == run_id)
                .values(
                    status=StepStatus.PENDING,
                    params=None,
                    param_sources=None,
                    result=None,
                    error=None,
                    started_at=None,
                    ended_at=None,
                    duration_ms=None,
                )
            )
            await self._fail_job(conn, job_id)
            return await self._defer(conn, run_id)

    async def redefer_run(self, run_id: str, job_id: int) -> int | None:
        """A run still `queued` whose job a stopped worker had fetched but not claimed: fail that
        job and defer a new one, in one transaction; None when the run is not queued any more."""
        c = t.runs.c
        async with self.db.begin() as conn:
            queued = await conn.scalar(
                sa.select(c.id).where((c.id == run_id) & (c.status == RunStatus.QUEUED)).with_for_update()
            )
            await self._fail_job(conn, job_id)
            return await self._defer(conn, run_id) if queued is not None else None

    async def remove_finished_jobs(self, older_than_s: float) -> int:
        """Delete jobs that ended (succeeded, failed, cancelled, aborted) more than `older_than_s`
        seconds ago, with their events; returns how many.

        procrastinate's builtin `remove_old_jobs` task runs the same deletion, but counts in whole
        hours and would also try to delete the job that the newest periodic defer still points to
        (a foreign key without a cascade), failing the whole deletion; this one leaves that job.
        """
        async with self.db.begin() as conn:
            result = await conn.execute(
                sa.text(
                    "DELETE FROM procrastinate_jobs j WHERE j.status::text = ANY(:statuses) "
                    "AND NOT EXISTS (SELECT 1 FROM procrastinate_periodic_defers d WHERE d.job_id = j.id) "
                    "AND (SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = j.id) "
                    "< NOW() - make_interval(secs => :s)"
                ),
                {"statuses": list(_FINAL_JOB_STATUSES), "s": older_than_s},
            )
        return int(result.rowcount or 0)

    async def fail_job(self, job_id: int) -> None:
        """Mark a stalled job (not a run's) failed."""
        async with self.db.begin() as conn:
            await self._fail_job(conn, job_id)

    @staticmethod
    async def _fail_job(conn: Any, job_id: int) -> None:
        await fail_job_in(conn, job_id)

    # -- visibility --------------------------------------------------------------------------------

    async def counts(self) -> list[QueueCount]:
        """Jobs per queue and status."""
        self._require_postgres()
        async with self.db.begin() as conn:
            rows = (
                await conn.execute(
                    sa.text(
                        "SELECT queue_name, status::text AS status, count(*) AS n FROM procrastinate_jobs "
                        "GROUP BY queue_name, status ORDER BY queue_name, status"
                    )
                )
            ).all()
        return [QueueCount(r.queue_name, r.status, int(r.n)) for r in rows]

    async def jobs(self, *, status: str | None = None, queue: str | None = None, limit: int = 50) -> list[JobRow]:
        """The newest jobs, optionally of one status and queue."""
        self._require_postgres()
        async with self.db.begin() as conn:
            rows = (
                await conn.execute(
                    sa.text(
                        "SELECT id, queue_name, task_name, status::text AS status, args, attempts, worker_id, scheduled_at "
                        "FROM procrastinate_jobs WHERE (CAST(:status AS text) IS NULL OR status::text = :status) "
                        "AND (CAST(:queue AS text) IS NULL OR queue_name = :queue) ORDER BY id DESC LIMIT :limit"
                    ),
                    {"status": status, "queue": queue, "limit": limit},
                )
            ).all()
        return [
            JobRow(
                int(r.id),
                r.queue_name,
                r.task_name,
                r.status,
                dict(r.args or {}),
                int(r.attempts),
                r.worker_id,
                as_utc(r.scheduled_at),
            )
            for r in rows
        ]

    async def worker_count(self, stalled_after_s: float) -> int:
        """Workers whose heartbeat is more recent than `stalled_after_s` seconds."""
        self._require_postgres()
        async with self.db.begin() as conn:
            return int(
                await conn.scalar(
                    sa.text(
                        "SELECT count(*) FROM procrastinate_workers "
                        "WHERE last_heartbeat >= NOW() - make_interval(secs => :s)"
                    ),
                    {"s": stalled_after_s},
                )
                or 0
            )


__all__ = ["BUILDS_QUEUE", "BUILD_TASK", "CALL_TASK", "TOOLS_QUEUE", "JobRow", "QueueCount", "QueueStore"]
