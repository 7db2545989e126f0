"""`toolagent worker` and `toolagent queue`: BUILD runs and async tool calls on a fleet of workers (PostgreSQL).

A worker opens the runtime once (store, catalogue, server pool) and runs the submitted runs
through its tool stack as the user who submitted each one. `toolagent build --submit` (or
`TOOLAGENT_EXECUTION=queue`) submits instead of running in the calling process.
"""

from __future__ import annotations

import asyncio
import signal
from typing import TYPE_CHECKING

import anyio
import typer
from rich.table import Table

from ..model.status import RunStatus
from ..store import open_store
from ._app import EXIT_USAGE, app, emit_json, err, fail, out, run, state

if TYPE_CHECKING:
    from ..runs.plan import BuildPlan
    from ..runs.steps import EventSink
    from ..store import Store
    from ..workers.dispatch import Dispatcher


def stalled_s() -> float:
    """`TOOLAGENT_WORKER_STALLED_S`, else the default."""
    from ..settings import Settings
    from ..workers.app import stalled_after_s

    return stalled_after_s(Settings.from_env())


@app.command("worker")
def worker(
    concurrency: int = typer.Option(4, "--concurrency", "-c", min=1, max=256, help="Runs at once."),
    queues: str = typer.Option(
        "builds,tools",
        "--queues",
        help="Comma-separated queues to take jobs from: builds (BUILD runs), tools (async calls).",
    ),
    shutdown_grace: float = typer.Option(
        30.0, "--shutdown-grace", min=0, help="Seconds running runs may finish after SIGTERM."
    ),
) -> None:
    """Run submitted BUILD runs and async tool calls until SIGTERM (needs a PostgreSQL store and the
    workers extra).

    Every step or call goes through the same gate, limits, records and cancellation as in process,
    as the user (and API key) that submitted it. SIGTERM stops taking runs and lets running
    ones finish within --shutdown-grace seconds; what is left ends `cancelled: worker shutting
    down`. A second SIGTERM stops at once; one before the worker takes jobs ends its start (exit 0). A worker whose heartbeat stops for
    TOOLAGENT_WORKER_STALLED_S seconds (default 60) has its runs closed by the others.

    Example: TOOLAGENT_DATABASE_URL=postgresql://app@db/toolagent toolagent worker --concurrency 8
    """
    # First, before the imports and the runtime's start (seconds): a container's process 1 ignores
    # a signal it has no handler for, so a SIGTERM then was lost. Nothing is open yet.
    signal.signal(signal.SIGTERM, _exit_before_start)
    from .._heap import tune_collector
    from ..engine.logs import configure_logging
    from ..mcp.config import ServersConfig
    from ..runtime import open_runtime
    from ..settings import Settings
    from ..workers.app import job_retention_s, stalled_after_s
    from ..workers.worker import run_worker

    names = [q.strip() for q in queues.split(",") if q.strip()]
    unknown = sorted(set(names) - {"builds", "tools"})
    if unknown or not names:
        raise fail(f"--queues: unknown queue {', '.join(unknown) or '(none)'}; use builds (and tools)", EXIT_USAGE)
    configure_logging(level="DEBUG" if state.debug else None, lifecycle=True)
    state.logging_ready = True
    settings = Settings.from_env()  # this process's, read once

    async def body() -> None:
        with anyio.CancelScope() as starting:
            # While the runtime opens, a signal ends the start; `run_worker` takes over from there.
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, starting.cancel)
            await serve_jobs()
        err.print("worker stopped", markup=False)

    async def serve_jobs() -> None:
        config = ServersConfig.load(state.servers)
        async with open_runtime(state.db, config, settings=settings) as runtime:
            if runtime.store.db.is_sqlite:
                raise fail(
                    "toolagent worker needs PostgreSQL: set TOOLAGENT_DATABASE_URL (or --db) to "
                    "postgresql://USER@HOST/DB; with SQLite, `toolagent build` runs in its own process",
                    EXIT_USAGE,
                )

            tune_collector(settings.gc_threshold)  # this process is the worker's own (`toolagent._heap`)

            def ready(worker_id: int | None) -> None:
                err.print(f"worker {worker_id} ready on {', '.join(names)} (concurrency {concurrency})", markup=False)

            def told(kind: str, run_id: str) -> None:
                err.print(f"{kind} {run_id}", markup=False)

            await run_worker(
                runtime,
                runtime.store,
                concurrency=concurrency,
                queues=names,
                shutdown_grace_s=shutdown_grace,
                stalled_s=stalled_after_s(settings),
                retention_s=job_retention_s(settings),
                on_event=told,
                ready=ready,
            )

    run(body)


def _exit_before_start(signum: int, frame: object) -> None:
    raise SystemExit(0)


@app.command("queue")
def queue(
    status: str | None = typer.Option(
        None, "--status", help="Only jobs in this status: todo, doing, succeeded, failed, cancelled, aborted."
    ),
    limit: int = typer.Option(20, "--limit", min=1, max=1000, help="How many jobs to list (newest first)."),
) -> None:
    """Jobs per queue and status, the live workers, and the newest jobs (PostgreSQL).

    Example: toolagent queue --status doing
    """

    async def body() -> None:
        async with open_store(state.db) as store:
            counts = await store.queue.counts()
            jobs = await store.queue.jobs(status=status, limit=limit)
            workers = await store.queue.worker_count(stalled_s())
        if state.json:
            emit_json(
                {
                    "counts": [{"queue": c.queue, "status": c.status, "count": c.count} for c in counts],
                    "workers": workers,
                    "jobs": [j.to_json() for j in jobs],
                }
            )
            return
        table = Table("queue", "status", "jobs")
        for c in counts:
            table.add_row(c.queue, c.status, str(c.count))
        out.print(table)
        out.print(f"{workers} live worker(s)")
        listing = Table("job", "queue", "task", "status", "args", "attempts", "worker")
        for j in jobs:
            listing.add_row(
                str(j.id),
                j.queue,
                j.task,
                j.status,
                ", ".join(f"{k}={v}" for k, v in j.args.items()),
                str(j.attempts),
                str(j.worker_id or ""),
            )
        out.print(listing)

    run(body)


def dispatcher(submit: bool, store: Store) -> Dispatcher:
    """Where this command's BUILD run goes: `--submit`, else `TOOLAGENT_EXECUTION`, on this store
    (see `toolagent.workers.dispatch`); a queue the setting asks for on SQLite is noted on stderr.

    Raises:
        UsageError: `--submit` on a SQLite store (exit 2, naming the setting to change).
    """
    from ..settings import Settings
    from ..workers.dispatch import Dispatcher

    dispatch = Dispatcher.decide(submit=submit, execution=Settings.from_env().execution, sqlite=store.db.is_sqlite)
    if dispatch.note:
        err.print(dispatch.note, markup=False)
    return dispatch


async def submit_build(
    store: Store, dispatch: Dispatcher, plan: BuildPlan, payload: object, *, wait: bool, progress: EventSink | None
) -> int:
    """Submit a planned run to the workers (`toolagent build --submit`); with `wait`, follow it to
    its end with the same output as a local build. Returns the exit code."""
    from ..engine import EngineConfig
    from ..engine.principals import Principals
    from ..workers.submit import follow_run
    from ._app import EXIT_FAILED

    me = await Principals(store.db, EngineConfig.load()).resolve_cli_user(state.user)
    run_id = await dispatch.submit_build(store, plan, payload if isinstance(payload, dict) else None, me)
    if not wait:
        if state.json:
            emit_json({"runId": run_id, "status": RunStatus.QUEUED})
        else:
            out.print(run_id, markup=False)
            err.print(f"submitted; follow it with: toolagent runs show {run_id}", markup=False)
        return 0
    err.print(f"run {run_id} queued; waiting for a worker", markup=False)
    row = await follow_run(store, run_id, progress)
    deliverable = await store.runs.get_deliverable(run_id) if row.deliverable_id else None
    ok = row.status == RunStatus.SUCCESS
    if state.json:
        emit_json(
            {
                "runId": run_id,
                "status": row.status,
                "deliverableId": row.deliverable_id,
                "deliverable": deliverable.to_json() if deliverable else None,
            }
        )
    else:
        if deliverable is not None:
            content = deliverable.content
            print(content, end="" if content.endswith("\n") else "\n")
        colour = "green" if ok else "red"
        err.print(
            f"[{colour}]run {run_id}: {row.status}[/] — deliverable {row.deliverable_id}"
            + (f" — {row.error}" if row.error else ""),
            markup=True,
        )
    return 0 if ok else EXIT_FAILED
