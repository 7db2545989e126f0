"""The procrastinate app over the store's PostgreSQL database: the build task and the reaper.

The tasks only name what to do; the worker process hands them its state (runtime, store,
running runs) through procrastinate's job context, so the app can be built by anything that
only submits or reads the queue.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..store.queue import BUILD_TASK, BUILDS_QUEUE, CALL_TASK, TOOLS_QUEUE

if TYPE_CHECKING:
    import procrastinate

    from ..settings import Settings

#: Name of the reaper's task, and the queueing lock that keeps at most one of it waiting.
REAP_TASK, REAP_LOCK = "toolagent.reap", "toolagent-reaper"
#: The reaper's queue: every worker takes it, whichever queues it was started on.
MAINTENANCE_QUEUE = "maintenance"
#: Key of the worker's state in procrastinate's job context.
STATE_KEY = "toolagent"
#: Seconds without a heartbeat after which a worker counts as stopped (`TOOLAGENT_WORKER_STALLED_S`).
DEFAULT_STALLED_S = 60.0
#: Seconds a finished job stays in the queue's table before the reaper deletes it (`TOOLAGENT_JOB_RETENTION_S`).
DEFAULT_JOB_RETENTION_S = 3600.0


def stalled_after_s(settings: Settings) -> float:
    """`TOOLAGENT_WORKER_STALLED_S` in `settings`, else `DEFAULT_STALLED_S`."""
    return settings.worker_stalled_s or DEFAULT_STALLED_S


def job_retention_s(settings: Settings) -> float:
    """`TOOLAGENT_JOB_RETENTION_S` in `settings`, else `DEFAULT_JOB_RETENTION_S`."""
    value = settings.job_retention_s
    return DEFAULT_JOB_RETENTION_S if value is None else value


def conninfo(url: str) -> str:
    """The libpq form of a store URL (`postgresql+psycopg://...` -> `postgresql://...`).

    Raises:
        UsageError: the store is SQLite.
    """
    if url.startswith("postgresql+psycopg://"):
        return "postgresql://" + url[len("postgresql+psycopg://") :]
    if url.startswith("postgresql://"):
        return url
    raise UsageError(
        "workers need PostgreSQL: set TOOLAGENT_DATABASE_URL (or --db) to postgresql://USER@HOST/DB; "
        "with SQLite, runs execute in the calling process"
    )


def reap_every_s(stalled_s: float) -> int:
    """How often the reaper runs: twice per stall period, between 1 and 30 seconds."""
    return max(1, min(30, int(stalled_s / 2)))


def make_app(url: str, *, stalled_s: float = DEFAULT_STALLED_S) -> procrastinate.App:
    """The app with the `builds` and `tools` tasks and the periodic reaper.

    Raises:
        UsageError: the store is SQLite, or procrastinate is not installed.
    """
    info = conninfo(url)
    try:
        import procrastinate
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise UsageError("workers need the `workers` extra: pip install 'toolagent[workers]'") from exc
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=info, min_size=1, max_size=4))

    @app.task(name=BUILD_TASK, queue=BUILDS_QUEUE, pass_context=True)
    async def build(context: procrastinate.JobContext, run_id: str) -> None:
        """Run one submitted BUILD run."""
        await _state(context).run_build(run_id, context)

    @app.task(name=CALL_TASK, queue=TOOLS_QUEUE, pass_context=True)
    async def call(context: procrastinate.JobContext, execution_id: str) -> None:
        """Run one submitted async tool call."""
        await _state(context).run_call(execution_id, context)

    @app.periodic(cron=f"* * * * * */{reap_every_s(stalled_s)}", periodic_id="reaper")
    @app.task(name=REAP_TASK, queue=MAINTENANCE_QUEUE, queueing_lock=REAP_LOCK, pass_context=True)
    async def reap(context: procrastinate.JobContext, timestamp: int) -> None:
        """Close or re-queue the runs and calls of workers whose heartbeat stopped, and delete the
        jobs that ended longer ago than the retention (this one's earlier ticks included)."""
        await _state(context).reap(prune=True)

    return app


def _state(context: Any) -> Any:
    state = (context.additional_context or {}).get(STATE_KEY)
    if state is None:
        raise RuntimeError("this job runs only in `toolagent worker` (no worker state in its context)")
    return state


__all__ = [
    "DEFAULT_JOB_RETENTION_S",
    "DEFAULT_STALLED_S",
    "MAINTENANCE_QUEUE",
    "REAP_LOCK",
    "REAP_TASK",
    "STATE_KEY",
    "conninfo",
    "make_app",
    "job_retention_s",
    "reap_every_s",
    "stalled_after_s",
]
