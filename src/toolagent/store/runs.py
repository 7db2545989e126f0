"""Store verbs for BUILD runs, their steps and their deliverables.

Every write verb masks secrets (by key, by shape and by remembered value) in payloads, overrides,
step params and results, errors and deliverables before they reach the database; the run in
memory keeps the real values.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import sqlalchemy as sa

from ..errors import NotFound
from ..model.owner import Owner, gone
from ..model.redaction import redact_known, redact_values, remember_secrets
from ..model.status import RunStatus, StepStatus
from ..model.times import as_utc
from . import tables as t
from .db import Database, utcnow
from .prepared import Prepared


@dataclass(frozen=True)
class RunRow:
    """A stored run."""

    id: str
    organization_slug: str | None
    agent_slug: str
    agent_version: str | None
    user_id: str | None
    status: str
    execution_mode: str
    stop_on_error: bool
    payload: Any
    overrides: Any
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    duration_ms: float | None
    deliverable_id: str | None
    owner_pid: int | None = None
    """The process that ran it (with the next two: see `RunStore.close_interrupted`)."""
    owner_host: str | None = None
    owner_boot: str | None = None
    plan: Any = None
    """Submitted runs (see `store/queue.py`): the plan a worker runs, as JSON."""
    principal: str | None = None
    """The user a submitted run runs as."""
    api_key_id: str | None = None
    """The API key a submitted run was asked with (re-checked at every step)."""
    run_metadata: Any = None
    """The request's metadata."""
    queued_at: datetime | None = None
    """When it was submitted."""
    job_id: int | None = None
    """Its procrastinate job."""
    worker: str | None = None
    """The worker that claimed it."""
    worker_host: str | None = None
    """That worker's host."""

    def to_json(self) -> dict[str, Any]:
        """API/CLI form."""
        return {
            "id": self.id,
            "agent": f"{self.organization_slug}/{self.agent_slug}",
            "agentVersion": self.agent_version,
            "user": self.user_id,
            "status": self.status,
            "executionMode": self.execution_mode,
            "stopOnError": self.stop_on_error,
            "payload": self.payload,
            "overrides": self.overrides,
            "error": self.error,
            "startedAt": _iso(self.started_at),
            "endedAt": _iso(self.ended_at),
            "durationMs": self.duration_ms,
            "deliverableId": self.deliverable_id,
        }


@dataclass(frozen=True)
class StepRow:
    """A stored step of a run."""

    run_id: str
    position: int
    tool: str
    status: str
    params: Any
    param_sources: Any
    result: Any
    error: str | None
    started_at: datetime | None
    ended_at: datetime | None
    duration_ms: float | None

    def to_json(self) -> dict[str, Any]:
        """API/CLI form."""
        return {
            "position": self.position,
            "tool": self.tool,
            "status": self.status,
            "params": self.params,
            "paramSources": self.param_sources,
            "result": self.result,
            "error": self.error,
            "startedAt": _iso(self.started_at),
            "endedAt": _iso(self.ended_at),
            "durationMs": self.duration_ms,
        }


@dataclass(frozen=True)
class DeliverableRow:
    """A stored deliverable."""

    id: str
    run_id: str
    format: str
    type: str
    content: str
    data: Any
    metadata: Any
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """API/CLI form."""
        return {
            "id": self.id,
            "runId": self.run_id,
            "format": self.format,
            "type": self.type,
            "content": self.content,
            "data": self.data,
            "metadata": self.metadata,
            "createdAt": _iso(self.created_at),
        }


def _iso(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def _row(cls: type[R], row: Any) -> R:
    m = dict(row._mapping)
    for key in ("started_at", "ended_at", "created_at", "queued_at"):
        if key in m:
            m[key] = as_utc(m[key])
    return cls(**m)


R = TypeVar("R")

#: Columns passed through the redaction before a write (see `toolagent.model.redaction`).
_RUN_DATA, _RUN_TEXT = ("payload", "overrides"), ("error",)
_STEP_DATA, _STEP_TEXT = ("params", "result"), ("error",)


class RunStore:
    """Insert and read runs, steps and deliverables."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def create_run(self, **values: Any) -> None:
        """Insert a run in status `running` (with its steps as `pending`, if given), owned by this process."""
        steps = values.pop("steps", [])
        # Secrets of the payload and overrides are masked in this run's every later record too.
        remember_secrets(values.get("payload"), values.get("overrides"))
        values = redact_values(values, data=_RUN_DATA, text=_RUN_TEXT)
        steps = [redact_values(s, data=_STEP_DATA, text=_STEP_TEXT) for s in steps]
        me = Owner.current()
        values = {"owner_pid": me.pid, "owner_host": me.host, "owner_boot": me.boot, **values}
        await self.db.write(_insert_run, values, steps)

    async def close_interrupted(self, me: Owner | None = None, *, run_id: str | None = None) -> list[str]:
        """Close as `failed` the running runs whose process is certainly gone (see `owner.gone`):
        a step that was running ends `failed`, steps not started end `skipped`, and the run's
        error says `interrupted: ...`. Runs of live processes and of other hosts are left alone.

        Args:
            me: The process asking (default: this one).
            run_id: Only this run.

        Returns:
            The ids of the runs closed.
        """
        me = me or Owner.current()
        c = t.runs.c
        # A worker's runs are the reaper's (`toolagent.workers.reaper`): it names the worker and the step.
        query = sa.select(c.id, c.started_at, c.owner_pid, c.owner_host, c.owner_boot).where(
            (c.status == RunStatus.RUNNING) & c.worker.is_(None)
        )
        if run_id is not None:
            query = query.where(c.id == run_id)
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        closed = []
        for row in rows:
            why = gone(row.owner_pid, row.owner_host, row.owner_boot, me)
            if why is None:
                continue
            now = utcnow()
            started = as_utc(row.started_at)
            error = f"interrupted: {why}"
            steps = t.run_steps.c
            async with self.db.begin() as conn:
                result = await conn.execute(
                    t.runs.update()
                    .where((c.id == row.id) & (c.status == RunStatus.RUNNING))
                    .values(
                        status=RunStatus.FAILED,
                        error=error,
                        ended_at=now,
                        duration_ms=(now - started).total_seconds() * 1000 if started else None,
                    )
                )
                if not result.rowcount:
                    continue
                await conn.execute(
                    t.run_steps.update()
                    .where((steps.run_id == row.id) & (steps.status == StepStatus.RUNNING))
                    .values(status=StepStatus.FAILED, error=error, ended_at=now)
                )
                await conn.execute(
                    t.run_steps.update()
                    .where((steps.run_id == row.id) & (steps.status == StepStatus.PENDING))
                    .values(status=StepStatus.SKIPPED)
                )
                await self._save_interrupted_deliverable(conn, row.id, error, now)
            closed.append(row.id)
            # Its running step's execution ended with the same process: closed now, by the same rule,
            # not left `running` in the active list and history until an engine starts again.
            await self._executions.close_interrupted(me, now, run_id=row.id)
        return closed

    @functools.cached_property
    def _executions(self) -> Any:
        from .executions import ExecutionStore

        return ExecutionStore(self.db)

    @staticmethod
    async def _save_interrupted_deliverable(conn: Any, run_id: str, error: str, now: datetime) -> None:
        """Give a run closed as interrupted a deliverable saying so (with what its steps did)."""
        from ..runs.deliverable import interrupted_deliverable  # runs imports the store: not at load

        run = _row(RunRow, (await conn.execute(sa.select(t.runs).where(t.runs.c.id == run_id))).one())
        rows = (
            await conn.execute(
                sa.select(t.run_steps).where(t.run_steps.c.run_id == run_id).order_by(t.run_steps.c.position)
            )
        ).all()
        deliverable = interrupted_deliverable(
            run, [_row(StepRow, r) for r in rows], error=error, ended_at=now, duration_ms=run.duration_ms
        )
        await conn.execute(t.deliverables.insert().values(run_id=run_id, **deliverable))
        await conn.execute(t.runs.update().where(t.runs.c.id == run_id).values(deliverable_id=deliverable["id"]))

    async def update_steps(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """Update several steps of a run in one transaction; each row has `position` and the same keys.

        Only while the run is running: a late write for a run already closed (its worker declared
        stopped) is discarded.
        """
        if not rows:
            return
        rows = [redact_values(r, data=_STEP_DATA, text=_STEP_TEXT) for r in rows]
        await self.db.write(_update_steps, run_id, rows)

    async def finish_run(self, run_id: str, *, deliverable: dict[str, Any] | None, **values: Any) -> bool:
        """Set the run's outcome and save its deliverable in one transaction, if the run is still
        running; False (nothing written) when another outcome came first, e.g. the reaper closed
        the run of a worker it declared stopped."""
        values = redact_values(values, data=_RUN_DATA, text=_RUN_TEXT)
        if deliverable is not None:
            # `content` is rendered from `data` after `data` went through the redaction, so only
            # remembered secret values are masked in it again; the shape rules would mangle media.
            deliverable = redact_values(deliverable, data=("data", "metadata"))
            if isinstance(deliverable.get("content"), str):
                deliverable["content"] = redact_known(deliverable["content"])
        if deliverable is not None:
            values["deliverable_id"] = deliverable["id"]
        return await self.db.write(_finish_run, run_id, values, deliverable)

    async def get_run(self, run_id: str) -> RunRow:
        """One run.

        Raises:
            NotFound: no such run.
        """
        async with self.db.begin() as conn:
            row = (await conn.execute(sa.select(t.runs).where(t.runs.c.id == run_id))).first()
        if row is None:
            raise NotFound(f"run '{run_id}' not found")
        if await self._close_if_orphaned([row]):
            return await self.get_run(run_id)
        return _row(RunRow, row)

    async def get_steps(self, run_id: str) -> list[StepRow]:
        """The steps of a run, in order."""
        async with self.db.begin() as conn:
            rows = (
                await conn.execute(
                    sa.select(t.run_steps).where(t.run_steps.c.run_id == run_id).order_by(t.run_steps.c.position)
                )
            ).all()
        return [_row(StepRow, r) for r in rows]

    async def list_runs(
        self,
        *,
        user_id: str | None = None,
        agent: tuple[str, str] | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[RunRow]:
        """Runs, newest first, optionally filtered."""
        query = sa.select(t.runs).order_by(t.runs.c.started_at.desc(), t.runs.c.id.desc()).limit(limit).offset(offset)
        if user_id is not None:
            query = query.where(t.runs.c.user_id == user_id)
        if agent is not None:
            query = query.where((t.runs.c.organization_slug == agent[0]) & (t.runs.c.agent_slug == agent[1]))
        if status is not None:
            query = query.where(t.runs.c.status == status)
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        if await self._close_if_orphaned(rows):
            async with self.db.begin() as conn:
                rows = (await conn.execute(query)).all()
        return [_row(RunRow, r) for r in rows]

    async def _close_if_orphaned(self, rows: Sequence[Any]) -> bool:
        """Close the running runs among `rows` whose process is certainly gone; whether any was.

        A long-lived reader (the API server) would otherwise show a killed process's run as
        running until some process opens the store again.
        """
        running = [row for row in rows if row.status == RunStatus.RUNNING and row.worker is None]
        if not running:
            return False  # the usual read: no process identity to look up
        me = Owner.current()
        closed = False
        for row in running:
            if gone(row.owner_pid, row.owner_host, row.owner_boot, me) is not None:
                closed = bool(await self.close_interrupted(me, run_id=row.id)) or closed
        return closed

    async def get_deliverable(self, deliverable_id: str) -> DeliverableRow:
        """One deliverable, by its id or its run's id.

        Raises:
            NotFound: no such deliverable.
        """
        query = sa.select(t.deliverables).where(
            (t.deliverables.c.id == deliverable_id) | (t.deliverables.c.run_id == deliverable_id)
        )
        async with self.db.begin() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            raise NotFound(f"deliverable '{deliverable_id}' not found")
        return _row(DeliverableRow, row)


# The write verbs' transactions, run by `Database.write` (a synchronous connection: on SQLite
# inline when the database is free, so a run's records cost no thread hop per statement).

# Every run makes these statements (`store.prepared`: compiled once, run on the driver's cursor).
_INSERT_RUN = Prepared(t.runs.insert())
_INSERT_STEPS = Prepared(t.run_steps.insert())
_INSERT_DELIVERABLE = Prepared(t.deliverables.insert())


def _insert_run(conn: sa.Connection, values: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    _INSERT_RUN.execute(conn, values)
    if steps:
        _INSERT_STEPS.execute(conn, [{"run_id": values["id"], **s} for s in steps])


@functools.lru_cache(maxsize=32)
def _steps_update(keys: tuple[str, ...]) -> Prepared:
    """The UPDATE of a running run's steps setting `keys` (built once per set of keys: building a
    statement costs more than running it)."""
    live = sa.exists().where((t.runs.c.id == sa.bindparam("b_run_id")) & (t.runs.c.status == RunStatus.RUNNING))
    return Prepared(
        t.run_steps.update()
        .where(
            (t.run_steps.c.run_id == sa.bindparam("b_run_id"))
            & (t.run_steps.c.position == sa.bindparam("b_position"))
            & live
        )
        .values({k: sa.bindparam(f"b_{k}") for k in keys})
    )


@functools.lru_cache(maxsize=32)
def _run_finish(keys: tuple[str, ...]) -> Prepared:
    """The UPDATE that ends a running run, setting `keys`."""
    return Prepared(
        t.runs.update()
        .where((t.runs.c.id == sa.bindparam("b_id")) & (t.runs.c.status == RunStatus.RUNNING))
        .values({k: sa.bindparam(f"b_{k}") for k in keys})
    )


def _update_steps(conn: sa.Connection, run_id: str, rows: list[dict[str, Any]]) -> None:
    keys = tuple(sorted(k for k in rows[0] if k != "position"))
    _steps_update(keys).execute(
        conn, [{"b_run_id": run_id, **{f"b_{k}": row[k] for k in ("position", *keys)}} for row in rows]
    )


def _finish_run(conn: sa.Connection, run_id: str, values: dict[str, Any], deliverable: dict[str, Any] | None) -> bool:
    keys = tuple(sorted(values))
    done = _run_finish(keys).execute(conn, {"b_id": run_id, **{f"b_{k}": values[k] for k in keys}})
    if not done.rowcount:
        return False
    if deliverable is not None:
        _INSERT_DELIVERABLE.execute(conn, {"run_id": run_id, **deliverable})
    return True
