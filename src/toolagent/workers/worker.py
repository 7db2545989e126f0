"""One worker process: one runtime (store, catalogue, server pool), many jobs through its tool stack.

A `builds` job claims its run (`queued` -> `running`, only once), loads the plan, the principal
and the API key the run was submitted with, and runs it with the runtime's BUILD runner, so every
step passes the same gate (the key re-checked when the step is admitted), limits, records and
cancellation as a local build. A `tools` job admits its queued call through the same layers
(`calls.py`): the admission transaction is the claim.

The raw inputs of a run or call (`queued_inputs`) are deleted when its job ends here, unless a
reaper put it back in the queue meanwhile.

Shutdown: the first SIGTERM (or SIGINT) stops taking jobs and lets running ones finish for the
grace period; what is left is cancelled and recorded `cancelled: worker shutting down`. A second
signal does that at once. A signal while the worker starts (before it takes jobs) ends the start.
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
from ..model.redaction import remember_secrets
from ..model.status import RunStatus
from ..runs.runner import BuildRunner
from ..store.db import utcnow
from ..tools.base import CallContext, CallOutcome, ToolSource
from .app import DEFAULT_JOB_RETENTION_S, DEFAULT_STALLED_S, MAINTENANCE_QUEUE, STATE_KEY, make_app
from .calls import queued_call_stack, run_queued_call
from .reaper import reap
from .submit import plan_from_json

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store import Store

logger = logging.getLogger("toolagent.workers")

#: Reason recorded on runs still running when a stopping worker's grace period ends.
SHUTDOWN_REASON = "cancelled: worker shutting down"
#: Who a call still running then is recorded as cancelled by.
SHUTDOWN_BY = "the worker shutting down"
#: Seconds a stopping worker lets running jobs finish (`--shutdown-grace`).
DEFAULT_SHUTDOWN_GRACE_S = 30.0


@dataclass
class WorkerState:
    """What the jobs of one worker process share."""

    runtime: Runtime
    store: Store
    stalled_s: float = DEFAULT_STALLED_S
    retention_s: float = DEFAULT_JOB_RETENTION_S
    """Seconds a finished job stays in the queue's table."""
    host: str = field(default_factory=socket.gethostname)
    app: Any = None
    runners: dict[str, BuildRunner] = field(default_factory=dict)
    on_event: Callable[[str, str], None] | None = None
    """Told `(kind, run_id)` as runs are claimed and end (the CLI prints them)."""
    task_group: anyio.abc.TaskGroup | None = None
    """Where calls run, apart from their job's task (see `run_call`)."""
    calls: dict[str, anyio.CancelScope] = field(default_factory=dict)
    """The calls running here, by execution id: the scope of each one's task."""
    _call_stack: ToolSource | None = None

    async def run_call(self, execution_id: str, context: Any) -> None:
        """Run a submitted async call, if it is still queued.

        The call runs in a task of the worker's own, and the job's task waits for it: a
        procrastinate abort cancels the job's task, which then stops the call as whoever asked
        (the store's cancel flag names them), so its record says who cancelled it.
        """
        if self._call_stack is None:
            self._call_stack = queued_call_stack(self.runtime)
        stack = self._call_stack
        assert self.task_group is not None
        done = anyio.Event()
        scope = anyio.CancelScope()
        ended: list[CallOutcome | None] = []
        failed: list[Exception] = []

        async def body() -> None:
            try:
                with scope:
                    ended.append(await run_queued_call(self.runtime, stack, execution_id))
            except Exception as exc:  # noqa: BLE001 - raised again in the job's task, not in the worker's
                failed.append(exc)
            finally:
                done.set()

        self.calls[execution_id] = scope
        self.task_group.start_soon(body)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                current = await self.runtime.executions.get(execution_id)
                self.stop_call(
                    execution_id, (current.cancel_requested_by if current else None) or "an abort of its job"
                )
                with anyio.move_on_after(10):
                    await done.wait()
            raise
        finally:
            self.calls.pop(execution_id, None)
            with anyio.CancelScope(shield=True):
                await self.store.queue.calls.drop_inputs(execution_id)
        if failed:
            raise failed[0]  # procrastinate records the job failed; the call's record says why
        if ended and ended[0] is not None:
            self._tell(ended[0].status, execution_id)

    def stop_call(self, execution_id: str, by: str) -> bool:
        """Cancel a call running here as `by` (before its admission: its task); False when none is."""
        scope = self.calls.get(execution_id)
        if scope is None:
            return False
        # The timeout layer registered the admitted call's scope under its id: cancelling that
        # one (not the task's) records `cancelled by <by>`. `Cancellation.cancel` would do it too,
        # but only for a principal entitled to the call, and it waits for the record.
        active = self.runtime.cancellation._active.get(execution_id)  # noqa: SLF001
        if active is not None:
            active.cancel(by)
        else:
            scope.cancel()
        return True

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
            await self.store.runs.finish_run(
                run_id,
                deliverable=None,
                status=RunStatus.FAILED,
                error=f"run could not start: {exc.message}",
                ended_at=now,
            )
            await self.store.queue.drop_inputs(run_id)
            self._tell(RunStatus.FAILED, run_id)
            return
        runner = self.runtime.runner(CallContext(principal, api_key=key))
        self.runners[run_id] = runner
        payload = queued["payload"]
        # As a local build does when it stores the run: the payload's and overrides' secrets are
        # masked by value wherever they come back (step params, results, the deliverable).
        remember_secrets(payload, plan.overrides, queued["run_metadata"])
        try:
            outcome = await runner.run(
                plan, payload, user=queued["user_id"], metadata=queued["run_metadata"], run_id=run_id, claimed=True
            )
            self._tell(outcome.status, run_id)
        finally:
            self.runners.pop(run_id, None)
            with anyio.CancelScope(shield=True):
                await self.store.queue.drop_run_inputs(run_id)

    def cancel_all(self, reason: str) -> int:
        """Cancel every run and call of this worker, recording `reason`; returns how many."""
        runs = sum(runner.cancel(run_id, reason) for run_id, runner in list(self.runners.items()))
        return runs + sum(self.stop_call(execution_id, SHUTDOWN_BY) for execution_id in list(self.calls))

    async def reap(self, *, prune: bool = False) -> dict[str, list[str]]:
        """Close or re-queue the runs and calls of stopped workers (see `reaper.py`); with `prune`,
        also delete the jobs that ended longer ago than `TOOLAGENT_JOB_RETENTION_S`."""
        # This worker's own jobs are never among them: its heartbeat is live.
        jobs = await self.app.job_manager.get_stalled_jobs(seconds_since_heartbeat=self.stalled_s)
        done = await reap(self.runtime, self.store, list(jobs))
        if prune:
            await self.store.queue.remove_finished_jobs(self.retention_s)
        return done

    def _tell(self, kind: str, run_id: str) -> None:
        if self.on_event is not None:
            self.on_event(kind, run_id)


async def run_worker(
    runtime: Runtime,
    store: Store,
    *,
    concurrency: int = 4,
    queues: list[str] | None = None,
    shutdown_grace_s: float = DEFAULT_SHUTDOWN_GRACE_S,
    stalled_s: float = DEFAULT_STALLED_S,
    retention_s: float = DEFAULT_JOB_RETENTION_S,
    on_event: Callable[[str, str], None] | None = None,
    ready: Callable[[int | None], None] | None = None,
) -> None:
    """Take jobs until SIGTERM/SIGINT (see the module docstring).

    Args:
        runtime: The process's runtime (started); every run goes through its tool stack.
        store: Its store (PostgreSQL).
        concurrency: Jobs run at once.
        queues: The queues to take jobs from (default both): `builds`, `tools`.
        shutdown_grace_s: How long running jobs may finish after the first signal.
        stalled_s: Seconds without a heartbeat after which a worker counts as stopped.
        retention_s: Seconds a finished job stays in the queue's table (`TOOLAGENT_JOB_RETENTION_S`).
        on_event: Told `(kind, run_id)` as runs are claimed and end.
        ready: Told the procrastinate worker id once the worker listens for jobs.
    """
    import asyncio

    from procrastinate.worker import Worker

    app = make_app(store.url, stalled_s=stalled_s)
    state = WorkerState(runtime, store, stalled_s=stalled_s, retention_s=retention_s, app=app, on_event=on_event)
    loop = asyncio.get_running_loop()
    signals = 0
    # The handlers are in place before the servers start: until the worker takes jobs a signal
    # cancels the start. Without them a signal during a start of seconds killed the process
    # outright, or, as a container's process 1 (which ignores a signal it has no handler for), was
    # lost, and the container was killed at its stop timeout.
    starting = anyio.CancelScope()
    running: tuple[Worker, anyio.abc.TaskGroup] | None = None

    async def grace_then_cancel() -> None:
        await anyio.sleep(shutdown_grace_s)
        state.cancel_all(SHUTDOWN_REASON)

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if running is None:
            logger.warning("stopping while starting: no jobs were taken")
            starting.cancel()
            return
        worker, tg = running
        if signals == 1:
            logger.warning("stopping: no new jobs; running ones have %g s to finish", shutdown_grace_s)
            worker.stop()
            tg.start_soon(grace_then_cancel)
        else:
            logger.warning("stopping now: cancelling %d running run(s)", state.cancel_all(SHUTDOWN_REASON))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    try:
        with starting:
            # The servers start and list their tools now, not in the first job: a worker announced
            # ready takes its first run as fast as its later ones, and the reaper can rate every tool.
            for name, why in (await runtime.catalogue.refresh()).items():
                logger.warning("server %s is unavailable: %s (its tools' calls will fail)", name, why)
            async with app.open_async():
                # At start too, not only on the reaper's schedule: a fleet restarted after a crash
                # closes the crashed runs before taking new work.
                await state.reap()
                worker = Worker(
                    app,
                    queues=[*(queues or ["builds", "tools"]), MAINTENANCE_QUEUE],
                    concurrency=concurrency,
                    name=f"{state.host}:{os.getpid()}",
                    install_signal_handlers=False,
                    shutdown_graceful_timeout=None,
                    update_heartbeat_interval=max(0.2, stalled_s / 6),
                    stalled_worker_timeout=stalled_s,
                    fetch_job_polling_interval=1.0,
                    abort_job_polling_interval=1.0,
                    additional_context={STATE_KEY: state},
                )
                async with anyio.create_task_group() as tg:
                    state.task_group = tg

                    async def announce() -> None:
                        while worker.worker_id is None:
                            await anyio.sleep(0.01)
                        if ready is not None:
                            ready(worker.worker_id)

                    tg.start_soon(announce)
                    # From here a signal stops the worker; `run` starts by clearing its stop
                    # request, so the worker is marked running only as it is entered.
                    running = worker, tg
                    try:
                        await worker.run()
                    finally:
                        tg.cancel_scope.cancel()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)


__all__ = ["DEFAULT_SHUTDOWN_GRACE_S", "SHUTDOWN_BY", "SHUTDOWN_REASON", "WorkerState", "run_worker"]
