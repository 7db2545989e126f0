"""BUILD runs on worker processes through procrastinate on PostgreSQL: every submitted run ends
exactly once, cancel before and during a run, a SIGKILLed worker (a write never re-run, a read
re-run), SIGTERM draining, a rate limit exact across two workers, a key revoked while queued."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.fleet import (  # noqa: F401 - `fleet` is a fixture
    LIVE,
    SERVER,
    STALLED_S,
    Fleet,
    Worker,
    cli,
    fleet,
    plan,
    store_of,
    until,
    until_final,
)
from _support.repo import REPO_ROOT, seconds_to_a_fresh_minute
from typer.testing import CliRunner

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.cli import app
from toolagent.engine import EngineConfig
from toolagent.engine.principals import Principal, Principals
from toolagent.model.status import RunStatus
from toolagent.runs import plan_build
from toolagent.store import RunRow, Store, open_store
from toolagent.workers import submit_run

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


async def test_fifty_submitted_runs_on_two_workers_each_end_exactly_once(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        p = plan(
            ["q/noop", "q/wait"], {"q/noop": {"tag": "{{payload.n}}"}, "q/wait": {"seconds": 0, "tag": "{{payload.n}}"}}
        )
        ids = [await submit_run(store, p, {"n": str(i)}, me) for i in range(25)]
        assert {(await store.runs.get_run(i)).status for i in ids} == {"queued"}
        # Both workers listen before the second half arrives (a ready worker takes the first
        # half alone in the time another starts its MCP server).
        await fleet.start()
        await fleet.start()
        ids += [await submit_run(store, p, {"n": str(i)}, me) for i in range(25, 50)]
        rows = await until_final(store, ids)
        assert [r.status for r in rows] == ["success"] * 50
        # Each run's two steps reached the server exactly once: nothing ran twice, nothing was lost.
        for tool in ("noop", "wait"):
            assert sorted(c["tag"] for c in fleet.calls(tool)) == sorted(str(i) for i in range(50))
        assert len({r.worker for r in rows}) == 2  # both workers took runs

        async def jobs_succeeded() -> bool:
            # A worker marks its job done once the run it ran has ended: a moment after.
            counts = {(c.queue, c.status): c.count for c in await store.queue.counts()}
            return counts.get(("builds", "succeeded"), 0) >= 50

        await until(jobs_succeeded, timeout_s=30)


async def test_cancel_a_queued_run_and_a_running_one(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        queued = await submit_run(store, plan(["q/noop"]), {}, me)
        result = await cli(fleet, "runs", "cancel", queued)
        assert result.exit_code == 0, result.output
        row = await store.runs.get_run(queued)
        assert row.status == "cancelled" and row.error == "cancelled by alice before it started"
        assert [j.status for j in await store.queue.jobs() if j.args == {"run_id": queued}] == ["cancelled"]
        shown = await cli(fleet, "queue", "--status", "cancelled")
        assert shown.exit_code == 0, shown.output
        listing = json.loads(shown.stdout)
        assert listing["counts"] == [{"queue": "builds", "status": "cancelled", "count": 1}]
        assert [j["args"] for j in listing["jobs"]] == [{"run_id": queued}] and listing["workers"] == 0
        await fleet.start()
        running = await submit_run(store, plan(["q/wait"], {"q/wait": {"seconds": 60, "tag": "long"}}), {}, me)

        async def started() -> bool:
            return bool(fleet.calls("wait"))

        await until(started)
        result = await cli(fleet, "runs", "cancel", running, "--wait", "20")
        assert result.exit_code == 0, result.output
        row = await store.runs.get_run(running)
        assert row.status == "cancelled"
        steps = await store.runs.get_steps(running)
        assert steps[0].status == "cancelled"

        async def server_told() -> bool:
            return bool(fleet.calls("wait", "cancelled"))

        await until(server_told, 20)  # the MCP server got notifications/cancelled
        assert fleet.calls("noop") == []  # the queued run never started


async def test_a_killed_worker_leaves_its_write_failed_and_called_once(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        first = await fleet.start()
        run_id = await submit_run(store, plan(["q/write"], {"q/write": {"tag": "w1", "seconds": 60}}), {}, me)

        async def writing() -> bool:
            return bool(fleet.calls("write"))

        await until(writing)
        first.signal(signal.SIGKILL)
        await first.exited()
        await fleet.start()  # its reaper (at start and every second) finds the stalled job
        (row,) = await until_final(store, [run_id])
        assert row.status == "failed"
        assert row.error is not None and row.error.startswith(f"interrupted: worker {row.worker} (pid ")
        assert row.error.endswith("stopped; outcome of q/write unknown")
        steps = await store.runs.get_steps(run_id)
        assert steps[0].status == "failed" and steps[0].error == row.error
        # A later look still sees one call: the write was never re-run.
        await until_final(store, [await submit_run(store, plan(["q/noop"]), {}, me)])
        assert len(fleet.calls("write")) == 1


async def test_a_read_only_run_of_a_killed_worker_is_run_again_and_succeeds(fleet: Fleet) -> None:
    marker = fleet.tmp / "seen"
    async with store_of(fleet) as (store, me):
        first = await fleet.start()
        run_id = await submit_run(
            store, plan(["q/noop", "q/wait-once"], {"q/wait-once": {"marker": str(marker), "seconds": 60}}), {}, me
        )

        async def reading() -> bool:
            return bool(fleet.calls("wait-once"))

        await until(reading)
        first.signal(signal.SIGKILL)
        await first.exited()
        await fleet.start()
        (row,) = await until_final(store, [run_id])
        assert row.status == "success", row.error
        assert [c["first"] for c in fleet.calls("wait-once")] == [True, False]


async def test_sigterm_lets_running_runs_finish_then_cancels_what_is_left(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        worker = await fleet.start(grace_s=20)
        short = await submit_run(store, plan(["q/wait"], {"q/wait": {"seconds": 1.5, "tag": "short"}}), {}, me)

        async def started() -> bool:
            return bool(fleet.calls("wait"))

        await until(started)
        worker.signal(signal.SIGTERM)
        assert await worker.exited() == 0
        assert (await store.runs.get_run(short)).status == "success"

        worker = await fleet.start(grace_s=0.5)
        long = await submit_run(store, plan(["q/wait"], {"q/wait": {"seconds": 60, "tag": "long"}}), {}, me)

        async def both() -> bool:
            return len(fleet.calls("wait")) == 2

        await until(both)
        worker.signal(signal.SIGTERM)
        assert await worker.exited() == 0
        row = await store.runs.get_run(long)
        assert row.status == "cancelled" and row.error == "cancelled: worker shutting down"

        # A second SIGTERM does not wait for the grace period.
        worker = await fleet.start(grace_s=120)
        again = await submit_run(store, plan(["q/wait"], {"q/wait": {"seconds": 60, "tag": "again"}}), {}, me)

        async def third() -> bool:
            return len(fleet.calls("wait")) == 3

        await until(third)
        worker.signal(signal.SIGTERM)

        async def stopping() -> bool:
            return any("stopping:" in line for line in worker.lines)

        await until(stopping)  # two signals sent at once would be delivered as one
        worker.signal(signal.SIGTERM)
        assert await worker.exited() == 0, "\n".join(worker.lines)
        row = await store.runs.get_run(again)
        steps = await store.runs.get_steps(again)
        assert (row.status, row.error) == ("cancelled", "cancelled: worker shutting down"), (steps, worker.lines)


async def test_a_rate_limit_holds_exactly_across_two_workers(fleet: Fleet) -> None:
    fleet.engine_config["tool_rate_per_minute"] = {"q/noop": 5}
    await anyio.sleep(seconds_to_a_fresh_minute(30.0))  # the workers' admissions inside one rate window
    async with store_of(fleet) as (store, me):
        ids = [await submit_run(store, plan(["q/noop"]), {}, me) for _ in range(12)]
        await fleet.start()
        await fleet.start()
        rows = await until_final(store, ids)
        assert sorted(r.status for r in rows) == ["failed"] * 7 + ["success"] * 5
        assert len(fleet.calls("noop")) == 5
        steps = [s for r in rows if r.status == "failed" for s in await store.runs.get_steps(r.id)]
        assert {s.status for s in steps} == {"denied"}


async def test_a_key_revoked_while_the_run_waited_is_refused(fleet: Fleet) -> None:
    async with store_of(fleet) as (store, me):
        principals = Principals(store.db, EngineConfig())
        key, _raw = await principals.create_key("alice", scopes=["*"])
        run_id = await submit_run(store, plan(["q/noop"]), {}, me, api_key=key)
        await principals.revoke_key(key.id)
        await fleet.start()
        (row,) = await until_final(store, [run_id])
        assert row.status == "failed"
        (step,) = await store.runs.get_steps(run_id)
        assert step.status == "denied" and "revoked" in (step.error or "")
        assert fleet.calls("noop") == []


async def test_build_submit_wait_prints_like_a_local_build_and_sqlite_refuses(fleet: Fleet, tmp_path: Path) -> None:
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        yaml.safe_dump(
            {
                "metadata": {"name": "fleet", "version": "1.0.0"},
                "configuration": {"tools": ["q/noop"], "toolParams": {"q/noop": {"tag": "cli"}}},
            }
        )
    )
    async with store_of(fleet):
        pass
    await fleet.start()
    result = await cli(fleet, "build", str(agent), "--submit", "--wait")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["status"] == "success" and body["deliverable"]["runId"] == body["runId"]
    assert [c["tag"] for c in fleet.calls("noop")] == ["cli"]

    sqlite = await cli(fleet, "build", str(agent), "--submit", db=f"sqlite:///{tmp_path / 's.db'}")
    assert sqlite.exit_code == 2
    assert "TOOLAGENT_DATABASE_URL" in sqlite.output and "PostgreSQL" in sqlite.output


async def test_the_api_submits_builds_answers_202_cancels_a_queued_run_and_shows_the_queue(fleet: Fleet) -> None:
    from _support.api_harness import agent_body, live_server, provision

    users = await anyio.to_thread.run_sync(lambda: provision(fleet.url, [("bob", "admin", "enterprise")]))
    servers = json.loads(fleet.servers.read_text())["mcpServers"]
    definition = {
        "metadata": {"name": "fleet", "version": "1.0.0"},
        "configuration": {"tools": ["q/noop"], "toolParams": {"q/noop": {"tag": "api"}}},
    }
    with live_server(fleet.tmp / "api", servers, db=fleet.url, env={"TOOLAGENT_EXECUTION": "queue"}) as server:
        with server.client(users["bob"], timeout=30) as http:
            assert http.put("/api/agents/tests/fleet", json=agent_body(definition)).status_code in (200, 201)
            accepted = http.post("/api/agents/tests/fleet/build", json={"payload": {}, "async": True})
            assert accepted.status_code == 202 and accepted.json()["status"] == "queued"
            run_id = accepted.json()["runId"]
            cancelled = http.post(f"/api/runs/{run_id}/cancel")
            assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
            second = http.post("/api/agents/tests/fleet/build", json={"payload": {}, "async": True}).json()["runId"]
            metrics = http.get("/metrics").text
            assert 'toolagent_queue_jobs{queue="builds",status="cancelled"} 1.0' in metrics
            assert 'toolagent_queue_jobs{queue="builds",status="todo"} 1.0' in metrics
            assert "toolagent_workers 0.0" in metrics
            await fleet.start()
            async with store_of(fleet) as (store, _):
                (row,) = await until_final(store, [second])
            assert row.status == "success" and [c["tag"] for c in fleet.calls("noop")] == ["api"]
            assert "toolagent_workers 1.0" in http.get("/metrics").text
