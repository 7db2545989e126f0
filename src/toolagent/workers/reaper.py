"""Runs and calls of workers whose heartbeat stopped (SIGKILL, a machine gone).

At most once: a call that may have written is never made again. A run is put back in the queue
only when every call it had started was of a tool rated `safe` or read-only; otherwise it is
closed `failed` with `interrupted: worker W on HOST stopped; outcome of STEP unknown`, and its
running executions likewise. An async call (`tools` queue) follows the same rule on its own: put
back in the queue when its tool is safe to repeat, else closed `failed` with
`interrupted: worker W stopped; outcome of TOOL unknown`. A run or call whose job was fetched but
not claimed yet never started: its job is simply deferred again. Whatever the stopped worker
writes afterwards is discarded: the store's finish verbs only change rows still running.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ToolAgentError
from ..model.status import ExecutionStatus, RunStatus
from ..store.db import utcnow
from ..store.queue import BUILD_TASK, CALL_TASK

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..store import RunRow, Store

logger = logging.getLogger("toolagent.workers.reaper")


async def repeatable(runtime: Runtime, tools: list[str]) -> bool:
    """Whether calling every one of `tools` again is safe: each rated `safe` or read-only."""
    for name in tools:
        try:
            entry = await runtime.tools.resolve(name)
        except ToolAgentError:
            return False
        spec = entry.spec
        # The server's own read-only hint counts only where the operator trusts its annotations.
        read_only = spec.trusted and spec.annotations.get("read_only_hint") is True
        if not (entry.risk == "safe" or read_only):
            return False
    return True


def interrupted_reason(run: RunRow, step: str | None) -> str:
    """`interrupted: worker W on HOST stopped; outcome of STEP unknown`."""
    worker = f"{run.worker} (pid {run.owner_pid})" if run.owner_pid else str(run.worker)
    what = f"outcome of {step} unknown" if step else "no step was running"
    return f"interrupted: worker {worker} on {run.worker_host} stopped; {what}"


async def reap(runtime: Runtime, store: Store, stalled_jobs: list[Any]) -> dict[str, list[str]]:
    """Close or re-queue the runs and calls of `stalled_jobs` (procrastinate jobs of stopped workers).

    Returns:
        `closed` and `requeued` run and execution ids.
    """
    done: dict[str, list[str]] = {"closed": [], "requeued": []}
    for job in stalled_jobs:
        if job.task_name == CALL_TASK:
            await _reap_call(runtime, store, job, done)
            continue
        run = await store.queue.run_of_job(job.id) if job.task_name == BUILD_TASK else None
        if run is None or run.status != RunStatus.RUNNING:
            # Not a run's job (the reaper's own), or its run already ended or was never claimed.
            if run is not None and run.status == RunStatus.QUEUED:
                await store.queue.redefer_run(run.id, job.id)  # fetched, never claimed: nothing ran
            else:
                await store.queue.fail_job(job.id)
            continue
        started, step = await store.queue.started_tools(run.id)
        reason = interrupted_reason(run, step)
        if await repeatable(runtime, started):
            await _close_executions(runtime, run.id, reason)
            if await store.queue.requeue_run(run.id, job.id) is not None:
                done["requeued"].append(run.id)
                logger.warning("re-queued run %s of a stopped worker (its calls are safe to repeat)", run.id)
            continue
        if await store.queue.close_stalled_run(run.id, job.id, reason):
            done["closed"].append(run.id)
            logger.warning("closed run %s: %s", run.id, reason)
        await _close_executions(runtime, run.id, reason)
    return done


async def _reap_call(runtime: Runtime, store: Store, job: Any, done: dict[str, list[str]]) -> None:
    """One stalled `tools` job: defer it again if its call never started, re-queue the call if its
    tool is safe to repeat, else close it `failed` with its unknown outcome."""
    calls = store.queue.calls
    execution_id = str((job.task_kwargs or {}).get("execution_id") or "")
    execution = await runtime.executions.get(execution_id) if execution_id else None
    if execution is None or execution.finished:
        # Ended before its worker stopped (or never stored): nothing to decide, its inputs go.
        await calls.close(execution_id, job.id, "")
        return
    if execution.status == ExecutionStatus.QUEUED:
        await calls.redefer(execution.id, job.id)  # fetched, never admitted: nothing ran
        return
    if await repeatable(runtime, [execution.tool]) and await calls.requeue(execution, job.id) is not None:
        done["requeued"].append(execution.id)
        logger.warning("re-queued call %s of a stopped worker (%s is safe to repeat)", execution.id, execution.tool)
        return
    reason = f"interrupted: worker {job.worker_id} stopped; outcome of {execution.tool} unknown"
    closed = await calls.close(execution.id, job.id, reason)
    if closed is not None:
        await runtime.recorder.audit_outcome(closed)
        done["closed"].append(execution.id)
        logger.warning("closed call %s: %s", execution.id, reason)


async def _close_executions(runtime: Runtime, run_id: str, reason: str) -> None:
    """End the run's executions still `running` as `failed`, with the reason (audited)."""
    now = utcnow()
    for execution in await runtime.executions.running(run_id=run_id):
        closed = replace(
            execution,
            status=ExecutionStatus.FAILED,
            ended_at=now,
            reason="interrupted",
            error=reason,
            duration_ms=execution.running_time_ms(now),
        )
        if await runtime.executions.finish(closed):
            await runtime.recorder.audit_outcome(closed)


__all__ = ["interrupted_reason", "reap", "repeatable"]
