"""Async tool calls on worker processes (the `tools` queue) and what the queue keeps at rest: an
async executeTool submitted through the API runs once on a worker; cancel before and during the
call; a SIGKILLed worker (a write never re-run, a read re-run); no clear secret left in any table
once runs and calls end; finished jobs (the reaper's own ticks included) deleted after the
retention."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
import sqlalchemy as sa
from _support.fleet import Fleet, fleet, plan, store_of, until, until_final  # noqa: F401 - `fleet` is a fixture

from toolagent.store import Store
from toolagent.store.executions import ExecutionStore
from toolagent.workers import submit_run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

SECRET = "Zq8vT3-very-secret-value"


@asynccontextmanager
async def api(fleet: Fleet) -> AsyncIterator[tuple[httpx.Client, Any]]:
    """The API on the fleet's store with execution `queue`, a client as admin `bob`, and the users."""
    from _support.api_harness import live_server, provision

    users = await anyio.to_thread.run_sync(lambda: provision(fleet.url, [("bob", "admin", "enterprise")]))
    servers = json.loads(fleet.servers.read_text())["mcpServers"]
    with live_server(
        fleet.tmp / "api",
        servers,
        db=fleet.url,
        env={"TOOLAGENT_EXECUTION": "queue"},
        engine_config=fleet.engine_config,
    ) as server:
        with server.client(users["bob"], timeout=30) as http:
            yield http, users


async def post(http: httpx.Client, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    return await anyio.to_thread.run_sync(lambda: http.post(path, json=body))


async def get(http: httpx.Client, path: str) -> httpx.Response:
    return await anyio.to_thread.run_sync(lambda: http.get(path))


async def submit(http: httpx.Client, tool: str, arguments: dict[str, Any], **extra: Any) -> str:
    answer = await post(http, "/api/tools/execute", {"name": tool, "arguments": arguments, "async": True, **extra})
    assert answer.status_code == 202, answer.text
    assert answer.json()["status"] == "queued"
    return str(answer.json()["executionId"])


async def final(http: httpx.Client, execution_id: str, timeout_s: float = 60) -> dict[str, Any]:
    with anyio.fail_after(timeout_s):
        while True:
            execution = (await get(http, f"/api/tools/executions/{execution_id}")).json()["execution"]
            if execution["status"] not in ("queued", "running"):
                return dict(execution)
            await anyio.sleep(0.05)


async def rows_holding(store: Store, text: str) -> dict[str, int]:
    """Rows of every table of the store (procrastinate's included) whose text form contains `text`."""
    found: dict[str, int] = {}
    async with store.db.begin() as conn:
        tables = [
            r[0]
            for r in await conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"))
        ]
        for name in tables:
            n = await conn.scalar(
                sa.text(f'SELECT count(*) FROM "{name}" AS r WHERE r::text LIKE :p'), {"p": f"%{text}%"}
            )
            if n:
                found[name] = int(n)
    return found


async def test_an_async_call_runs_once_on_a_worker_and_leaves_no_secret_at_rest(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        async with api(fleet) as (http, _users):
            execution_id = await submit(http, "q/noop", {"tag": SECRET}, context={"metadata": {"password": SECRET}})
            shown = (await get(http, f"/api/tools/executions/{execution_id}")).json()["execution"]
            assert shown["status"] == "queued" and shown["metadata"] == {"password": "[REDACTED]"}
            assert [j.args for j in await store.queue.jobs(queue="tools")] == [{"execution_id": execution_id}]
            # A BUILD run with the same secret in its payload, rendered into a step's params.
            run_id = await submit_run(
                store, plan(["q/noop"], {"q/noop": {"tag": "{{payload.password}}"}}), {"password": SECRET}, me
            )
            assert await rows_holding(store, SECRET) == {"queued_inputs": 2}  # kept aside until they run
            await fleet.start(queues="tools")
            ended = await final(http, execution_id)
            assert ended["status"] == "success" and ended["userId"] == "bob"
            await fleet.start(queues="builds")
            (row,) = await until_final(store, [run_id])
            assert row.status == "success"
            # Each reached the server exactly once, with the real value.
            assert [c["tag"] for c in fleet.calls("noop")] == [SECRET, SECRET]
            history = (await get(http, "/api/tools/history?toolName=q/noop")).json()
            assert [e["id"] for e in history["executions"] if e["id"] == execution_id] == [execution_id]
            assert (await get(http, "/api/tools/metrics?toolName=q/noop")).status_code == 200

            async def inputs_dropped() -> bool:
                return not await rows_holding(store, SECRET)

            await until(inputs_dropped, 20)  # each job drops its inputs as it ends
            assert ended["metadata"] == {"password": "[REDACTED]"}


async def test_cancel_a_queued_call_and_a_running_one(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, _):
        async with api(fleet) as (http, _users):
            queued = await submit(http, "q/noop", {"tag": "never"})
            cancelled = await post(http, f"/api/tools/executions/{queued}/cancel")
            assert cancelled.status_code == 200, cancelled.text
            assert cancelled.json()["status"] == "cancelled"
            record = (await get(http, f"/api/tools/executions/{queued}")).json()["execution"]
            assert record["status"] == "cancelled" and record["reason"] == "cancelled by bob before it started"
            assert [j.status for j in await store.queue.jobs(queue="tools")] == ["cancelled"]
            # Its arguments as shown (the record and its audit row); no raw inputs kept.
            assert await rows_holding(store, "never") == {"executions": 1, "audit_log": 1}

            await fleet.start(queues="tools")
            running = await submit(http, "q/wait", {"seconds": 60, "tag": "long"})

            async def started() -> bool:
                return bool(fleet.calls("wait"))

            await until(started)
            answer = await post(http, f"/api/tools/executions/{running}/cancel")
            assert answer.status_code == 200, answer.text
            record = await final(http, running, 20)
            assert record["status"] == "cancelled" and record["reason"] == "cancelled by bob"

            async def server_told() -> bool:
                return bool(fleet.calls("wait", "cancelled"))

            await until(server_told, 20)  # the MCP server got notifications/cancelled
            assert fleet.calls("noop") == []  # the queued call never started

            async def running_job() -> str:
                jobs = {j.args["execution_id"]: j.status for j in await store.queue.jobs(queue="tools")}
                return jobs[running]

            async def job_ended() -> bool:
                # The worker writes the record's end before the queue marks its job finished.
                return await running_job() != "doing"

            await until(job_ended, 20)
            assert await running_job() in ("aborted", "succeeded")


async def test_a_killed_worker_fails_its_write_and_reruns_its_read(fleet: Fleet) -> None:
    marker = fleet.tmp / "seen"
    async with store_of(fleet) as (store, _):
        async with api(fleet) as (http, _users):
            first = await fleet.start(queues="tools")
            write = await submit(http, "q/write", {"tag": "w1", "seconds": 60})
            read = await submit(http, "q/wait-once", {"marker": str(marker), "seconds": 60})

            async def both_started() -> bool:
                return bool(fleet.calls("write")) and bool(fleet.calls("wait-once"))

            await until(both_started)
            first.signal(signal.SIGKILL)
            await first.exited()
            await fleet.start(queues="tools")  # its reaper (at start and every second) finds the stalled jobs
            written = await final(http, write)
            assert written["status"] == "failed" and written["reason"] == "interrupted"
            assert written["error"].startswith("interrupted: worker ")
            assert written["error"].endswith("stopped; outcome of q/write unknown")
            reread = await final(http, read)
            assert reread["status"] == "success", reread
            assert [c["first"] for c in fleet.calls("wait-once")] == [True, False]
            # A later call still sees one write: it was never re-run.
            await final(http, await submit(http, "q/noop", {"tag": "after"}))
            assert len(fleet.calls("write")) == 1
            assert await store.queue.calls.get(write) is None


async def test_finished_jobs_are_deleted_after_the_retention(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        await fleet.start(queues="builds", env={"TOOLAGENT_JOB_RETENTION_S": "2"})
        ids = [await submit_run(store, plan(["q/noop"]), {}, me) for _ in range(3)]
        await until_final(store, ids)

        async def reaps() -> list[int]:
            return [j.id for j in await store.queue.jobs(status="succeeded", limit=1000) if j.task == "toolagent.reap"]

        seen = await reaps()

        async def builds_gone_and_reaps_turned_over() -> bool:
            jobs = await store.queue.jobs(limit=1000)
            left = {j.args.get("run_id") for j in jobs if j.task == "toolagent.build"}
            now = await reaps()
            return not (left & set(ids)) and bool(now) and min(now) > max(seen, default=0)

        await until(builds_gone_and_reaps_turned_over, 30)
        # Bounded: one tick a second, kept two seconds, plus the ones in flight.
        assert len(await reaps()) <= 6
        runs = [await store.runs.get_run(i) for i in ids]
        assert {r.status for r in runs} == {"success"}  # the runs' history stays


async def test_a_key_revoked_while_the_call_waited_is_refused_on_the_worker(fleet: Fleet) -> None:
    from _support.api_harness import revoke

    async with store_of(fleet) as (store, _):
        async with api(fleet) as (http, users):
            execution_id = await submit(http, "q/noop", {"tag": "revoked"})
            await anyio.to_thread.run_sync(lambda: revoke(fleet.url, users["bob"].key_id))
            await fleet.start(queues="tools")
            executions = ExecutionStore(store.db)

            async def ended() -> bool:
                record = await executions.get(execution_id)
                return record is not None and record.finished

            await until(ended)
            record = await executions.get(execution_id)
            assert record is not None and (record.status, record.denied) == ("failed", True)
            assert "revoked" in (record.reason or "")
            assert fleet.calls("noop") == []  # refused at admission: the server never saw it
            assert await store.queue.calls.get(execution_id) is None and await rows_holding(store, '"revoked"') == {
                "executions": 1,
                "audit_log": 1,
            }
