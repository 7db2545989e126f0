"""Queued runs and calls in the store: submitting defers the job in the same transaction, a claim
happens once, a late result of a worker already declared stopped is discarded, and the raw inputs
are kept only until the run or call ends."""

from __future__ import annotations

from dataclasses import replace

import pytest
import sqlalchemy as sa

from toolagent.errors import StoreError, UsageError
from toolagent.model.execution import Execution
from toolagent.store import open_store
from toolagent.store.db import utcnow
from toolagent.store.executions import ExecutionStore

pytestmark = pytest.mark.anyio

RUN = {
    "id": "run_1",
    "organization_slug": "tests",
    "agent_slug": "a",
    "user_id": "alice",
    "execution_mode": "sequential",
    "stop_on_error": True,
    "plan": {"agent": "tests/a"},
    "principal": "alice",
    "payload": {"password": "hunter2-xyz"},
    "inputs": {"plan": {"agent": "tests/a"}, "payload": {"password": "hunter2-xyz"}},
}
STEPS = [{"position": 0, "tool": "q/write"}, {"position": 1, "tool": "q/noop"}]


async def jobs_of(store, run_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [j.status for j in await store.queue.jobs() if j.args == {"run_id": run_id}]


async def inputs_of(store, key: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The raw inputs kept for a queued run or call."""
    async with store.db.begin() as conn:
        return [r.id for r in await conn.execute(sa.text("SELECT id FROM queued_inputs WHERE id = :k"), {"k": key})]


async def test_submit_stores_the_run_and_its_job_together_or_neither(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        job_id = await store.queue.submit_run(steps=STEPS, **RUN)
        row = await store.runs.get_run("run_1")
        assert row.status == "queued" and row.job_id == job_id and row.queued_at is not None
        assert await jobs_of(store, "run_1") == ["todo"]
        # Shown redacted; the worker's copy is kept aside.
        assert row.payload == {"password": "[REDACTED]"} and await inputs_of(store, "run_1") == ["run_1"]
        assert (await store.queue.queued_plan("run_1"))["payload"] == {"password": "hunter2-xyz"}
        # A second submission with the same id fails on the run's key: its job is rolled back too.
        with pytest.raises(StoreError):
            await store.queue.submit_run(steps=STEPS, **RUN)
        assert await jobs_of(store, "run_1") == ["todo"]
        assert len(await store.queue.jobs()) == 1


async def test_a_run_is_claimed_once_and_a_cancelled_one_never(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        await store.queue.submit_run(steps=STEPS, **RUN)
        first = await store.queue.claim_run("run_1", worker="7", host="h1")
        assert first is not None and first.status == "running" and first.worker == "7"
        assert await store.queue.claim_run("run_1", worker="8", host="h2") is None
        await store.queue.submit_run(steps=STEPS, **{**RUN, "id": "run_2"})
        assert await store.queue.cancel_queued_run("run_2", "alice")
        assert await store.queue.claim_run("run_2", worker="7", host="h1") is None
        assert await jobs_of(store, "run_2") == ["cancelled"]
        assert (await store.runs.get_deliverable("run_2")).metadata["interrupted"] is True
        assert await inputs_of(store, "run_2") == []  # cancelled before it started: its inputs go with it


async def test_a_late_result_of_a_stopped_worker_is_discarded(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        job_id = await store.queue.submit_run(steps=STEPS, **RUN)
        await store.queue.claim_run("run_1", worker="7", host="h1")
        async with store.db.begin() as conn:  # the job as a worker holds it
            await conn.execute(sa.text("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = :id"), {"id": job_id})
        await store.runs.update_steps("run_1", [{"position": 0, "status": "running", "started_at": utcnow()}])
        reason = "interrupted: worker 7 (pid 1) on h1 stopped; outcome of q/write unknown"
        assert await store.queue.close_stalled_run("run_1", job_id, reason)
        assert await jobs_of(store, "run_1") == ["failed"]
        assert await inputs_of(store, "run_1") == []
        # The stopped worker answers after all: neither its steps nor its outcome are written.
        await store.runs.update_steps("run_1", [{"position": 0, "status": "success", "started_at": utcnow()}])
        done = await store.runs.finish_run(
            "run_1",
            deliverable={
                "id": "dlv_late",
                "format": "json",
                "type": "t",
                "content": "{}",
                "data": {},
                "metadata": {},
                "created_at": utcnow(),
            },
            status="success",
            error=None,
            ended_at=utcnow(),
        )
        assert done is False
        row = await store.runs.get_run("run_1")
        assert row.status == "failed" and row.error == reason and row.deliverable_id != "dlv_late"
        assert [s.status for s in await store.runs.get_steps("run_1")] == ["failed", "skipped"]


async def test_the_queue_needs_postgres(tmp_path) -> None:  # type: ignore[no-untyped-def]
    async with open_store(f"sqlite+aiosqlite:///{tmp_path / 's.db'}") as store:
        with pytest.raises(UsageError, match="TOOLAGENT_DATABASE_URL"):
            await store.queue.submit_run(steps=STEPS, **RUN)


async def test_a_queued_run_whose_job_a_stopped_worker_fetched_gets_a_new_job(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        job_id = await store.queue.submit_run(steps=STEPS, **RUN)
        async with store.db.begin() as conn:  # fetched by a worker that then died before its claim
            await conn.execute(sa.text("UPDATE procrastinate_jobs SET status = 'doing' WHERE id = :id"), {"id": job_id})
        new_job = await store.queue.redefer_run("run_1", job_id)
        assert new_job is not None and new_job != job_id
        assert sorted(await jobs_of(store, "run_1")) == ["failed", "todo"]
        assert (await store.runs.get_run("run_1")).job_id == new_job


def queued_call(execution_id: str = "exec_1_a") -> Execution:
    return Execution(
        id=execution_id,
        tool="q/write",
        category="general",
        risk="moderate",
        status="queued",
        user="alice",
        started_at=utcnow(),
        arguments={"token": "abc-123-secret", "tag": "t"},
        timeout_ms=30_000,
    )


async def test_a_queued_call_is_shown_redacted_cancelled_once_and_leaves_no_inputs(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        calls = store.queue.calls
        call = queued_call()
        await calls.submit(call, {"token": "abc-123-secret", "tag": "t"}, None)
        shown = await ExecutionStore(store.db).get(call.id)
        assert shown is not None and shown.status == "queued" and shown.arguments["token"] == "[REDACTED]"
        taken = await calls.get(call.id)
        assert taken is not None and taken.arguments == {"token": "abc-123-secret", "tag": "t"}
        assert [j.args for j in await store.queue.jobs(queue="tools")] == [{"execution_id": call.id}]
        cancelled = await calls.cancel(call.id, "alice")
        assert cancelled is not None and cancelled.status == "cancelled"
        assert cancelled.reason == "cancelled by alice before it started"
        assert await calls.cancel(call.id, "alice") is None and await calls.get(call.id) is None
        assert [j.status for j in await store.queue.jobs(queue="tools")] == ["cancelled"]
        assert await inputs_of(store, call.id) == []
        # Counted once in the totals metrics read, as a call cancelled in process is.
        async with store.db.begin() as conn:
            totals = (
                await conn.execute(sa.text("SELECT status, calls FROM execution_totals WHERE tool = 'q/write'"))
            ).all()
        assert [(r.status, r.calls) for r in totals] == [("cancelled", 1)]
        # A worker's admission of it now finds nothing to take (and so starts nothing).
        assert await store.db.write(lambda conn: calls.take_in(conn, call.id)) is False


async def test_a_call_of_a_stopped_worker_is_requeued_or_closed(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        calls = store.queue.calls
        for execution_id in ("exec_1_r", "exec_1_w"):
            await calls.submit(queued_call(execution_id), {"tag": execution_id}, None)
            # Admitted by a worker: the running row takes the queued one's place.
            await store.db.write(lambda conn, i=execution_id: calls.take_in(conn, i))
            await ExecutionStore(store.db).record(replace(queued_call(execution_id), status="running"))
        jobs = {j.args["execution_id"]: j.id for j in await store.queue.jobs(queue="tools")}
        requeued = await calls.requeue(queued_call("exec_1_r"), jobs["exec_1_r"])
        assert requeued is not None and (await calls.get("exec_1_r")) is not None  # queued again, inputs kept
        closed = await calls.close(
            "exec_1_w", jobs["exec_1_w"], "interrupted: worker 7 stopped; outcome of q/write unknown"
        )
        assert closed is not None and (closed.status, closed.reason) == ("failed", "interrupted")
        assert await inputs_of(store, "exec_1_w") == [] and await inputs_of(store, "exec_1_r") == ["exec_1_r"]
        statuses = {(j.args["execution_id"], j.status) for j in await store.queue.jobs(queue="tools")}
        assert statuses == {("exec_1_r", "failed"), ("exec_1_r", "todo"), ("exec_1_w", "failed")}


async def test_a_call_admitted_before_its_step_record_was_written_counts_as_started(pg_url: str) -> None:
    # Step records are written behind the steps; the execution row is committed before the call.
    async with open_store(pg_url) as store:
        job_id = await store.queue.submit_run(steps=STEPS, **RUN)
        await store.queue.claim_run("run_1", worker="7", host="h1")
        await ExecutionStore(store.db).record(replace(queued_call("exec_1_s"), status="running", run_id="run_1"))
        assert [s.status for s in await store.runs.get_steps("run_1")] == ["pending", "pending"]
        assert await store.queue.started_tools("run_1") == (["q/write"], "q/write")
        reason = "interrupted: worker 7 (pid 1) on h1 stopped; outcome of q/write unknown"
        assert await store.queue.close_stalled_run("run_1", job_id, reason)
        assert [(s.status, s.error) for s in await store.runs.get_steps("run_1")] == [
            ("failed", reason),
            ("skipped", None),
        ]
