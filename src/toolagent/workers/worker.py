"""One worker process: one runtime (store, catalogue, server pool), many jobs through its tool stack.

A job claims its run (`queued` -> `running`, only once), loads the plan, the principal and the
API key the run was submitted with, and runs it with the runtime's BUILD runner, so every step
passes the same gate (the key re-checked when the step is admitted), limits, records and
cancellation as a local build.

Shutdown: the first SIGTERM (or SIGINT) stops taking jobs and lets running ones finish for the
grace period; what is left is cancelled and recorded `cancelled: worker shutting down`. A second
signal does that at once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ..errors import ToolAgentError
from ..runs.runner import BuildRunner
from ..status import RunStatus
from ..store.db import utcnow
from ..tools.base import CallContext
from .app import DEFAULT_STALLED_S, STATE_KEY, make_app
from .reaper import reap
from .submit import plan_from_json

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store import Store

logger = logging.getLogger("toolagent.workers")

#: Reason recorded on runs still running when a stopping worker's grace period ends.
SHUTDOWN_REASON = "cancelled: worker shutting down"
#: Seconds a stopping worker lets running jobs finish (`--shutdown-grace`).
DEFAULT_SHUTDOWN_GRACE_S = 30.0


@dataclass
class WorkerState:
    """What the jobs of one worker process share."""

    runtime: Runtime
    store: Store
    stalled_s: float = DEFAULT_STALLED_S
    host: str = field(default_factory=socket.gethostname)
    app: Any = None
    runners: dict[str, BuildRunner] = field(default_factory=dict)
    on_event: Callable[[str, str], None] | None = None
    """Told `(kind, run_id)` as runs are claimed and end (the CLI prints them)."""

    async def run_build(self, run_id: str, context: Any) -> None:
        """Run a submitted run, if it is still queued (a cancelled or already claimed one is left)."""
        worker = str(getattr(context.job, "worker_id", None) or os.getpid())
        row = await self.store.queue.claim_run(run_id, worker=worker, host=self.host)
        if row is None:
            return
        self._tell("claimed", run_id)
        try:
            queued = await self.store.queue.queued_plan(run_id)
            plan = plan_from_json(queued["plan"])
            principal = await self.runtime.principals.get_user(queued["principal"])
            key = await self.runtime.principals.get_key(queued["api_key_id"]) if queued["api_key_id"] else None
        except ToolAgentError as exc:
            # Nothing ran: the run cannot be run as submitted (its user or key is gone, its plan broken).
            now = utcnow()
            await self.store.runs.finish_run(run_id, deliverable=None, status=RunStatus.FAILED,
                                             error=f"run could not start: {exc.message}", ended_at=now)
            self._tell("failed", run_id)
            return
        runner = self.runtime.runner(CallContext(principal, api_key=key))
        self.runners[run_id] = runner
        try:
            payload = queued["plan"].get("payload", queued["payload"])  # the shown `payload` is redacted
            outcome = await runner.run(plan, payload, user=queued["user_id"],
                                       metadata=queued["run_metadata"], run_id=run_id, claimed=True)
            self._tell(outcome.status, run_id)
        finally:
            self.runners.pop(run_id, None)

    def cancel_all(self, reason: str) -> int:
        """Cancel every run of this worker, recording `reason`; returns how many."""
        return sum(runner.cancel(run_id, reason) for run_id, runner in list(self.runners.items()))

    async def reap(self) -> dict[str, list[str]]:
        """Close or re-queue the runs of stopped workers (see `reaper.py`)."""
        # This worker's own jobs are never among them: its heartbeat is live.
        jobs = await self.app.job_manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_s)
        return await reap(self.runtime, self.store, list(jobs))

    def _tell(self, kind: str, run_id: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, run_id)


async def run_worker(
    runtime: Runtime, store: Store, *, concurrency: int = 4, queues: list[str] | None = None,
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S, stalled_s: float = DEFAULT_STALLED_S,
    on_event: Callable[[str, str], None] | None = None, ready: Callable[[int | None], None] | None = None,
) -> None:
    """Take jobs until SIGTERM/SIGINT (see the module docstring).

    Args:
        runtime: The process's runtime (started); every run goes through its tool stack.
        store: Its store (PostgreSQL).
        concurrency: Jobs run at once.
        queues: The queues to take jobs from (default `builds`).
        shutdown_grace_s: How long running jobs may finish after the first signal.
        stalled_s: Seconds without a heartbeat after which a worker counts as stopped.
        on_event: Told `(kind, run_id)` as runs are claimed and end.
        ready: Told the procrastinate worker id once the worker listens for jobs.
    """
    from procrastinate.worker import Worker

    app = make_app(store.url, stalled_s=stalled_s)
    state = WorkerState(runtime, store, stalled_s=stalled_s, app=app, on_event=on_event)
    async with app.open_async():
        # At start too, not only on the reaper's schedule: a fleet restarted after a crash
        # closes the crashed runs before taking new work.
        await state.reap()
        worker = Worker(
            app, queues=queues or ["builds"], concurrency=concurrency, name=f"{state.host}:{os.getpid()}",
            install_signal_handlers=False, shutdown_graceful_timeout=None,
            update_heartbeat_interval=max(0.2, stalled_s / 6), stalled_worker_timeout=stalled_s,
            fetch_job_polling_interval=1.0, abort_job_polling_interval=1.0,
            additional_context={STATE_KEY: state},
        )
        signals = 0

        async def grace_then_cancel() -> None:
            await anyio.sleep(shutdown_grace_s)
            state.cancel_all(SHUTDOWN_REASON)

        async with anyio.create_task_group() as tg:
            def on_signal() -> None:
                nonlocal signals
                signals += 1
                if signals == 1:
                    logger.warning("stopping: no new jobs; running ones have %g s to finish", shutdown_grace_s)
                    worker.stop()
                    tg.start_soon(grace_then_cancel)
                else:
                    logger.warning("stopping now: cancelling %d running run(s)", state.cancel_all(SHUTDOWN_REASON))

            import asyncio

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, on_signal)
            try:
                async def announce() -> None:
                    while worker.worker_id is None:
                        await anyio.sleep(0.01)
                    if ready is not None:
                        ready(worker.worker_id)

                tg.start_soon(announce)
                await worker.run()
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
                tg.cancel_scope.cancel()


__all__ = ["DEFAULT_SHUTDOWN_GRACE_S", "SHUTDOWN_REASON", "WorkerState", "run_worker"]
