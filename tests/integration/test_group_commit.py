"""Group commit stays exact: under bursts of concurrent calls, in one process and across two
processes on one store, on SQLite and PostgreSQL — rate limits and budgets admit exactly their
quota, the audit chain (keyed) verifies, the running rows and the per-tool totals add up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from _support import engine_harness
from _support.engine_harness import passed

from toolagent.engine import Engine, EngineConfig, Principal
from toolagent.engine.audit import AuditLog
from toolagent.errors import BudgetExceeded, RateLimited
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.store import Store, open_store
from toolagent.store import engine_tables as et

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

KEY = b"group-commit-test-key"
#: Half a minute into a rate window, so a burst never straddles two.
T0 = datetime(2025, 3, 10, 12, 0, 30, tzinfo=UTC).timestamp()
SPEC = ToolSpec(name="fs/read", server="fs", tool="read", category="file", risk="safe")


async def ok(arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(False, None, [], "ok")


def config(rate: int | None, budget: int | None = None) -> EngineConfig:
    return EngineConfig.from_data({"plans": {"free": {"rate_per_minute": rate, "monthly_budget": budget}}})


async def burst(engines: list[Engine], who: Principal, n: int) -> list[Any]:
    return await engine_harness.burst(engines, who, n, SPEC, ok, limit_s=120)


async def store_counts(store: Store) -> dict[str, Any]:
    """What the store holds: executions by status, the totals' calls by status, audit rows by event."""
    t, tot, audit = et.executions, et.execution_totals, sa.table("audit_log", sa.column("event"))
    async with store.db.begin() as conn:
        rows = dict((await conn.execute(sa.select(t.c.status, sa.func.count()).group_by(t.c.status))).all())
        totals = dict(
            (await conn.execute(sa.select(tot.c.status, sa.func.sum(tot.c.calls)).group_by(tot.c.status))).all()
        )
        events = dict((await conn.execute(sa.select(audit.c.event, sa.func.count()).group_by(audit.c.event))).all())
    return {"rows": rows, "totals": {k: int(v) for k, v in totals.items()}, "audit": events}


@pytest.mark.parametrize("engines", [1, 2])
async def test_a_burst_admits_exactly_the_rate_quota(db_url: str, engines: int) -> None:
    async with open_store(db_url) as store:
        running = [
            Engine(store, config=config(50), clock=lambda: T0, audit=AuditLog(store.db, key=KEY))
            for _ in range(engines)
        ]
        async with running[0], running[-1]:
            bob = await running[0].principals.add_user("bob", level="execute_basic", plan="free")
            results = await burst(running, bob, 200)
            assert passed(results) == 50
            assert sum(isinstance(r, RateLimited) for r in results) == 150
            # The burst was batched: some transaction held more than one call's write.
            assert max(e.recorder.writes.stats.largest for e in running) > 1
            verified = await AuditLog(store.db, key=KEY).verify()
            assert verified.ok and verified.keyed, verified.reason
            assert await store_counts(store) == {
                "rows": {"success": 50, "failed": 150},
                "totals": {"success": 50, "failed": 150},
                "audit": {"decision": 200, "outcome": 50},
            }


async def test_a_burst_uses_exactly_the_monthly_budget(db_url: str) -> None:
    async with open_store(db_url) as store, Engine(store, config=config(None, budget=30), clock=lambda: T0) as engine:
        bob = await engine.principals.add_user("bob", level="execute_basic", plan="free")
        results = await burst([engine], bob, 100)
        assert passed(results) == 30
        assert sum(isinstance(r, BudgetExceeded) for r in results) == 70
        assert (await engine.audit.verify()).ok  # type: ignore[union-attr]


async def test_running_rows_and_totals_are_exact_while_calls_run(db_url: str) -> None:
    release = anyio.Event()
    started = 0

    async def held(arguments: dict[str, Any]) -> ToolResult:
        nonlocal started
        started += 1
        await release.wait()
        return ToolResult(False, None, [], "ok")

    async with open_store(db_url) as store, Engine(store, config=config(None), clock=lambda: T0) as engine:
        bob = await engine.principals.add_user("bob", level="execute_basic", plan="free")
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(lambda i=i: engine.execute(SPEC, {"i": i}, bob, held))
                while started < 100:
                    await anyio.sleep(0.01)
                # Every call runs only once its admission committed: all 100 rows are there.
                assert len(await engine.executions.running()) == 100
                release.set()
        assert await engine.executions.running() == []
        counts = await store_counts(store)
        assert counts["rows"] == {"success": 100} and counts["totals"] == {"success": 100}
        assert counts["audit"] == {"decision": 100, "outcome": 100}
        assert (await engine.audit.verify()).ok  # type: ignore[union-attr]


WORKER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import anyio
    from toolagent.engine import Engine, EngineConfig
    from toolagent.errors import RateLimited
    from toolagent.store import open_store
    from toolagent.model.spec import ToolResult, ToolSpec

    url, go = sys.argv[1], Path(sys.argv[2])
    SPEC = ToolSpec("fs/read", "fs", "read", category="file", risk="safe")
    CONFIG = EngineConfig.from_data({"plans": {"free": {"rate_per_minute": 50, "monthly_budget": None}}})

    async def ok(arguments):
        return ToolResult(False, None, [], "ok")

    async def main():
        async with open_store(url) as store, Engine(store, config=CONFIG, clock=lambda: T0_PLACEHOLDER) as engine:
            bob = await engine.principals.get_user("bob")
            print("ready", flush=True)
            while not go.exists():
                await anyio.sleep(0.01)
            passed = refused = 0

            async def one(i):
                nonlocal passed, refused
                try:
                    await engine.execute(SPEC, {"i": i}, bob, ok)
                    passed += 1
                except RateLimited:
                    refused += 1

            async with anyio.create_task_group() as tg:
                for i in range(100):
                    tg.start_soon(one, i)
            print(json.dumps({"passed": passed, "refused": refused,
                              "largest": engine.recorder.writes.stats.largest}), flush=True)

    anyio.run(main)
""").replace("T0_PLACEHOLDER", repr(T0))


async def test_two_processes_on_one_store_stay_exact(tmp_path: Path, db_url: str) -> None:
    async with open_store(db_url) as store:
        await Engine(store).principals.add_user("bob", level="execute_basic", plan="free")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "TOOLAGENT_AUDIT_KEY": KEY.decode()}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), db_url, str(tmp_path / "go")], stdout=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        (tmp_path / "go").touch()
        outputs = [json.loads(p.communicate(timeout=120)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0]
    assert sum(o["passed"] for o in outputs) == 50
    assert sum(o["refused"] for o in outputs) == 150
    async with open_store(db_url) as store:
        verified = await AuditLog(store.db, key=KEY).verify()
        assert verified.ok and verified.keyed and verified.rows_checked == 250, verified.reason
        assert await store_counts(store) == {
            "rows": {"success": 50, "failed": 150},
            "totals": {"success": 50, "failed": 150},
            "audit": {"decision": 200, "outcome": 50},
        }
