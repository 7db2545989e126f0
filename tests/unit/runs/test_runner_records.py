"""A BUILD step's execution record: the step goes on once its call ends, its outcome's write rides
with the next step's admission, and the run ends only once every record is stored."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.errors import StoreError
from toolagent.model.status import ExecutionStatus
from toolagent.runs import plan_build
from toolagent.testing import in_memory_pool, temp_store, test_runtime
from toolagent.tools.base import CallContext

pytestmark = pytest.mark.anyio


def _server():  # noqa: ANN202 - an MCPServer
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("calc", log_level="WARNING")

    @server.tool(name="add")
    def add(a: int, b: int) -> dict[str, int]:
        return {"value": a + b}

    @server.tool(name="inc")
    def inc(value: int) -> dict[str, int]:
        return {"value": value + 1}

    @server.tool(name="square")
    def square(value: int) -> dict[str, int]:
        return {"value": value * value}

    return server


def _plan(tools: list[str], params: dict[str, Any]) -> Any:
    text = yaml.safe_dump({"metadata": {"name": "chain"}, "configuration": {"tools": tools, "toolParams": params}})
    defn = load_definition_text(text)
    return plan_build(LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "chain"))


async def test_each_steps_outcome_shares_a_commit_with_the_next_admission(tmp_path: Path) -> None:
    async with temp_store(tmp_path) as store, test_runtime(store, in_memory_pool({"calc": _server()})) as (rt, me):
        finished: list[str] = []
        rt.events.subscribe(lambda e: finished.append(e.execution_id), types={"execution_finished"})
        plan = _plan(["calc/add", "calc/inc", "calc/square"], {"calc/add": {"a": 1, "b": 2}})
        before = rt.recorder.writes.stats
        outcome = await rt.runner(CallContext(me)).run(plan)
        after = rt.recorder.writes.stats
        executions = (await rt.history(me)).executions
        verified = await rt.audit.verify()  # type: ignore[union-attr]

    assert outcome.ok, outcome.error
    assert outcome.steps[2].result is not None and outcome.steps[2].result.structured == {"value": 16}
    # Three admissions and three outcomes in four commits: admission 1, then each outcome with the
    # next admission, then the last outcome when the run settles its records.
    assert (after.writes - before.writes, after.batches - before.batches) == (6, 4)
    assert sorted(e.status for e in executions) == [ExecutionStatus.SUCCESS] * 3
    assert all(e.ended_at is not None and e.duration_ms is not None for e in executions)
    assert sorted(finished) == sorted(e.id for e in executions)  # each announced once stored
    assert verified.ok and verified.rows_checked == 6  # a decision and an outcome row per step


async def test_a_step_whose_record_cannot_be_stored_fails_its_run(tmp_path: Path) -> None:
    async with temp_store(tmp_path) as store, test_runtime(store, in_memory_pool({"calc": _server()})) as (rt, me):
        finish_many_in = rt.executions.finish_many_in

        def failing(conn: Any, executions: Any) -> set[str]:
            raise StoreError("store error (sqlite): disk I/O error")

        rt.executions.finish_many_in = failing  # type: ignore[method-assign]
        outcome = await rt.runner(CallContext(me)).run(_plan(["calc/add"], {"calc/add": {"a": 1, "b": 2}}))
        rt.executions.finish_many_in = finish_many_in  # type: ignore[method-assign]
        steps = await store.runs.get_steps(outcome.run_id)
        run_row = await store.runs.get_run(outcome.run_id)

    assert outcome.status == "failed"
    assert steps[0].status == "failed"
    assert steps[0].error == "its execution record could not be stored: store error (sqlite): disk I/O error"
    assert run_row is not None and run_row.status == "failed"


async def test_a_sequential_runs_writes_never_wait_for_company(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its steps' writes come close together, but each step writes only once the one before is
    # in: waiting for company would only add to every step.
    from toolagent.store.batch import GroupCommit

    waits: list[float] = []
    gather = GroupCommit._gather

    async def counted(self: GroupCommit, window_s: float) -> None:
        waits.append(window_s)
        await gather(self, window_s)

    monkeypatch.setattr(GroupCommit, "_gather", counted)
    # Other tasks always ready to run, as with the transport tasks of a server over stdio.
    monkeypatch.setattr("toolagent.tools.records.others_ready", lambda: True)
    async with temp_store(tmp_path) as store, test_runtime(store, in_memory_pool({"calc": _server()})) as (rt, me):
        # No pause for a checkpoint of the log between two steps' writes (`Database.write`).
        monkeypatch.setattr(store.db, "log_checkpoints", None)
        # Writes a microsecond apart by the batcher's clock, whatever the machine's speed: the
        # closest they could come, so a lone write would wait for company if anything made it.
        ticks = itertools.count()
        rt.recorder.writes.clock = lambda: next(ticks) * 1e-6
        tools = ["calc/add", "calc/inc", "calc/square"]
        runner = rt.runner(CallContext(me))
        for _ in range(5):
            outcome = await runner.run(_plan(tools, {"calc/add": {"a": 1, "b": 2}}))
            assert outcome.ok, outcome.error
        assert rt.recorder.writes.arrival_gap_s < rt.recorder.writes.idle_s  # close together indeed
        assert rt.recorder.writes.stats.writes > 15  # each step's admission and outcome went through it
    assert waits == []
