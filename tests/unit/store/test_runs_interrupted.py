"""Runs left `running` by a process that has ended are closed as interrupted when a store opens."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from toolagent.model.owner import Owner
from toolagent.store import open_store
from toolagent.store.db import Database

pytestmark = pytest.mark.anyio

STARTED = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def dead_pid() -> int:
    """The id of a process that has ended (and been reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def run_values(run_id: str, owner: Owner | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": run_id,
        "organization_slug": "demo",
        "agent_slug": "a",
        "user_id": "bob",
        "status": "running",
        "execution_mode": "sequential",
        "stop_on_error": True,
        "started_at": STARTED,
        "steps": [
            {"position": 0, "tool": "s/one", "status": "success"},
            {"position": 1, "tool": "s/two", "status": "running"},
            {"position": 2, "tool": "s/three", "status": "pending"},
        ],
    }
    if owner is not None:
        values.update(owner_pid=owner.pid, owner_host=owner.host, owner_boot=owner.boot)
    return values


async def test_a_run_whose_process_ended_is_closed_with_its_steps(db_url: str) -> None:
    me = Owner.current()
    async with open_store(db_url) as store:
        await store.runs.create_run(**run_values("run_dead", Owner(dead_pid(), me.host, me.boot)))
        await store.runs.create_run(**run_values("run_mine", None))  # this process: alive
        await store.runs.create_run(**run_values("run_elsewhere", Owner(dead_pid(), "another-host", "x")))
        await store.runs.create_run(**run_values("run_rebooted", Owner(me.pid, me.host, "an-earlier-boot")))

        closed = await store.runs.close_interrupted()

        assert sorted(closed) == ["run_dead", "run_rebooted"]
        dead = await store.runs.get_run("run_dead")
        assert dead.status == "failed" and dead.ended_at is not None
        assert dead.error is not None and dead.error.startswith("interrupted: process ")
        assert "ended before it finished" in dead.error
        assert [(s.status, s.error) for s in await store.runs.get_steps("run_dead")] == [
            ("success", None),
            ("failed", dead.error),
            ("skipped", None),
        ]
        deliverable = await store.runs.get_deliverable("run_dead")
        assert dead.deliverable_id == deliverable.id
        assert (deliverable.format, deliverable.type, deliverable.data["error"]) == (
            "json",
            "interrupted-run",
            dead.error,
        )
        assert [(r["tool"], r["status"]) for r in deliverable.data["results"]] == [
            ("s/one", "success"),
            ("s/two", "failed"),
            ("s/three", "skipped"),
        ]
        assert deliverable.metadata["interrupted"] is True and deliverable.metadata["agent"]["slug"] == "a"
        rebooted = await store.runs.get_run("run_rebooted")
        assert rebooted.error is not None and "restarted" in rebooted.error
        for alive in ("run_mine", "run_elsewhere"):
            assert (await store.runs.get_run(alive)).status == "running"
        assert (await store.runs.get_run("run_mine")).owner_pid == me.pid
        assert await store.runs.close_interrupted() == []  # closed once


async def test_opening_the_store_closes_them(db_url: str) -> None:
    me = Owner.current()
    async with open_store(db_url) as store:
        await store.runs.create_run(**run_values("run_dead", Owner(dead_pid(), me.host, me.boot)))
    async with open_store(db_url) as store:
        assert (await store.runs.get_run("run_dead")).status == "failed"


async def test_runs_of_a_store_made_before_the_owner_columns_survive_the_migration(db_url: str) -> None:
    db = Database(db_url)
    try:
        assert await db.migrate("0004") == [1, 2, 3, 4]
        async with db.begin() as conn:
            await conn.execute(
                sa.text(
                    "INSERT INTO runs (id, agent_slug, status, execution_mode, stop_on_error, started_at) "
                    "VALUES ('run_old', 'a', 'running', 'sequential', true, :at)"
                ),
                {"at": STARTED},
            )
        assert await db.migrate() == [5, 6, 7, 8, 9, 10, 11]
    finally:
        await db.dispose()
    async with open_store(db_url) as store:
        old = await store.runs.get_run("run_old")
        # No owner recorded: nobody can tell whether its process lives, so it is left alone.
        assert (old.status, old.owner_pid) == ("running", None)


async def test_reading_a_run_of_a_dead_process_closes_it(db_url: str) -> None:
    # A long-lived reader (the API server) sees a killed CLI build end at its next look, without
    # waiting for a new process to open the store.
    me = Owner.current()
    async with open_store(db_url) as store:
        await store.runs.create_run(**run_values("run_dead", Owner(dead_pid(), me.host, me.boot)))
        await store.runs.create_run(**run_values("run_listed", Owner(dead_pid(), me.host, me.boot)))
        await store.runs.create_run(**run_values("run_mine", None))

        dead = await store.runs.get_run("run_dead")
        assert dead.status == "failed" and dead.error is not None and dead.error.startswith("interrupted: ")
        listed = {r.id: r.status for r in await store.runs.list_runs()}
        assert listed == {"run_dead": "failed", "run_listed": "failed", "run_mine": "running"}
        assert (await store.runs.get_deliverable("run_listed")).type == "interrupted-run"
