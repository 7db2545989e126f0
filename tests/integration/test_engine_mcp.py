"""The engine over a real stdio MCP server (the probe): a timeout abandons the call and the server sees
the cancellation; BUILD runs through the engine (gate per step, history per step); cancelling a run
from another engine stops its running step on the server."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.mcp_harness import probe_config, read_log, servers

from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.engine import Engine, EngineConfig
from toolagent.engine.events import Event
from toolagent.mcp.pool import ServerPool
from toolagent.runs import plan_build
from toolagent.store import Store, open_store
from toolagent.tools.base import CallContext

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def agent(configuration: dict[str, Any]) -> LoadedAgent:
    text = yaml.safe_dump({"metadata": {"name": "engine-probe", "version": "1.0.0"}, "configuration": configuration})
    defn = load_definition_text(text)
    return LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "engine-probe")


async def server_saw_cancellation(log: Path) -> None:
    # The probe runs in another process and writes its events to a file: wait until it has.
    with anyio.fail_after(5):
        while not any(e["event"] == "cancelled" for e in read_log(log)):
            await anyio.sleep(0.05)


@contextlib.asynccontextmanager
async def setup(tmp_path: Path, log: Path) -> AsyncIterator[tuple[Store, ServerPool, Engine]]:
    config = servers(probe=probe_config(log, trusted=True))
    async with (
        open_store(f"sqlite+aiosqlite:///{tmp_path / 'store.db'}") as store,
        ServerPool(config) as pool,
        Engine(store, config=EngineConfig(cancel_poll_ms=100), pool=pool) as engine,
    ):
        assert not await engine.catalogue.refresh()
        yield store, pool, engine


async def test_timeout_over_stdio(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    async with setup(tmp_path, log) as (_, pool, engine):
        me = await engine.principals.add_user("bob", level="execute_basic")
        assert engine.registry.require("probe/sleep").risk == "safe"  # trusted read-only hint
        sleep = await pool.tool_spec("probe/sleep")

        async def invoke(arguments: dict[str, Any]) -> Any:
            return await pool.call(sleep, arguments, timeout_s=None)

        with anyio.fail_after(10):  # a hang guard: the 30 s call is abandoned at its timeout
            execution = await engine.execute(sleep, {"seconds": 30, "tag": "slow"}, me, invoke, timeout_ms=1000)
        assert (execution.status, execution.reason) == ("cancelled", "timeout after 1000 ms")
        await server_saw_cancellation(log)
        again = await engine.execute(sleep, {"seconds": 0, "tag": "quick"}, me, invoke)
        assert (
            again.status == "success"
            and again.result is not None
            and again.result.structured == {"text": "quick", "length": 0}
        )


async def test_build_run_through_the_engine(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    async with setup(tmp_path, log) as (store, pool, engine):
        me = await engine.principals.add_user("bob", level="execute_basic")
        assert engine.registry.require("probe/fail").risk == "dangerous"  # no hints: MCP's default is destructive
        runner = engine.runner(CallContext(me))
        plan = plan_build(
            agent(
                {
                    "tools": ["probe/echo", "probe/fail"],
                    "stopOnError": False,
                    "toolParams": {"probe/echo": {"text": "hi"}},
                }
            ),
            None,
        )
        with anyio.fail_after(30):
            outcome = await runner.run(plan, user="bob")
        assert [(s.tool, s.status) for s in outcome.steps] == [("probe/echo", "success"), ("probe/fail", "denied")]
        assert "requires admin" in (outcome.steps[1].error or "")
        page = await engine.history(me, run_id=outcome.run_id)
        assert sorted((e.tool, e.status, e.denied) for e in page.executions) == [
            ("probe/echo", "success", False),
            ("probe/fail", "failed", True),
        ]
        assert [e["tool"] for e in read_log(log) if e["event"] == "call"] == ["echo"]  # the denied step never arrived


async def test_cancel_run_from_another_engine(tmp_path: Path) -> None:
    log = tmp_path / "probe.log"
    async with setup(tmp_path, log) as (store, pool, engine), Engine(store) as other:
        me = await engine.principals.add_user("bob", level="execute_basic")
        started = anyio.Event()
        run_ids: list[str] = []

        def on_started(event: Event) -> None:
            run_ids.append(event.run_id or "")
            started.set()

        engine.events.subscribe(on_started, types=["execution_started"])
        runner = engine.runner(CallContext(me))
        plan = plan_build(
            agent(
                {
                    "tools": ["probe/sleep", "probe/echo"],
                    "toolParams": {"probe/sleep": {"seconds": 30, "tag": "long"}, "probe/echo": {"text": "x"}},
                }
            ),
            None,
        )
        outcomes: list[Any] = []

        async def build() -> None:
            outcomes.append(await runner.run(plan, user="bob"))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(build)
                await started.wait()
                cancelled = await other.cancel_run(run_ids[0], me)
                assert len(cancelled) == 1
        [outcome] = outcomes
        assert [s.status for s in outcome.steps][0] == "cancelled"
        assert "cancelled by bob" in (outcome.steps[0].error or "")
        await server_saw_cancellation(log)
