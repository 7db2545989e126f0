"""The engine across real processes sharing one store: exact rate limits, `toolagent executions cancel`
from another process, and executions of a killed process closed as interrupted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from toolagent.cli import app
from toolagent.engine.principals import Principals
from toolagent.store import open_store

pytestmark = pytest.mark.timeout(120)

WORKER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import anyio
    from toolagent.engine import Engine, EngineConfig
    from toolagent.errors import RateLimited
    from toolagent.store import open_store
    from toolagent.model.spec import ToolResult, ToolSpec

    url, mode, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    SPEC = ToolSpec("fs/read", "fs", "read", category="file", risk="safe")
    CONFIG = EngineConfig.from_data({"plans": {"free": {"rate_per_minute": 10, "monthly_budget": None}},
                                     "cancel_poll_ms": 100})

    async def ok(arguments):
        return ToolResult(False, None, [], "ok")

    async def block(arguments):
        await anyio.sleep_forever()

    async def main():
        # In a burst, a fixed clock puts every process in the same rate window.
        clock = (lambda: 1_741_608_030.0) if mode == "burst" else time.time
        async with open_store(url) as store, Engine(store, config=CONFIG, clock=clock) as engine:
            bob = await engine.principals.get_user("bob")
            if mode == "burst":
                print("ready", flush=True)
                while not go.exists():  # start together with the other process
                    await anyio.sleep(0.01)
                passed = 0

                async def one():
                    nonlocal passed
                    try:
                        await engine.execute(SPEC, {}, bob, ok)
                        passed += 1
                    except RateLimited:
                        pass

                async with anyio.create_task_group() as tg:
                    for _ in range(15):
                        tg.start_soon(one)
                print(json.dumps({"passed": passed}), flush=True)
            else:
                engine.events.subscribe(lambda e: print(e.execution_id, flush=True), types=["execution_started"])
                execution = await engine.execute(SPEC, {}, bob, block, timeout_ms=60000)
                print(json.dumps(execution.to_json()), flush=True)

    anyio.run(main)
""")


def add_users(url: str) -> None:
    async def body() -> None:
        async with open_store(url) as store:
            p = Principals(store.db)
            await p.add_user("bob", level="execute_basic", plan="free")
            await p.add_user("root", level="admin", plan="enterprise")

    anyio.run(body)


def worker(tmp_path: Path, url: str, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    return subprocess.Popen(
        [sys.executable, str(script), url, mode, str(tmp_path / "go")], stdout=subprocess.PIPE, text=True
    )


def test_rate_limit_is_exact_across_processes(tmp_path: Path, db_url: str) -> None:
    add_users(db_url)
    procs = [worker(tmp_path, db_url, "burst") for _ in range(2)]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        (tmp_path / "go").touch()
        outputs = [p.communicate(timeout=60)[0] for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0]
    assert sum(json.loads(o.strip().splitlines()[-1])["passed"] for o in outputs) == 10


def test_cancel_from_the_cli_and_interrupted_executions(tmp_path: Path, db_url: str) -> None:
    add_users(db_url)
    cli = CliRunner()
    proc = worker(tmp_path, db_url, "block")
    try:
        assert proc.stdout is not None
        execution_id = proc.stdout.readline().strip()
        assert execution_id.startswith("exec_")
        result = cli.invoke(app, ["--db", db_url, "--user", "bob", "--json", "executions", "active"])
        active = json.loads(result.stdout)
        assert [e["id"] for e in active["executions"]] == [execution_id] and active["count"] == 1
        assert active["executions"][0]["runningTime"] >= 0
        result = cli.invoke(app, ["--db", db_url, "--user", "root", "executions", "cancel", execution_id])
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"{execution_id}: cancelled (cancelled by root)\n"
        final = json.loads(proc.communicate(timeout=30)[0].strip().splitlines()[-1])
        assert (final["status"], final["reason"]) == ("cancelled", "cancelled by root")
    finally:
        proc.kill()

    killed = worker(tmp_path, db_url, "block")
    try:
        assert killed.stdout is not None
        orphan = killed.stdout.readline().strip()
    finally:
        killed.kill()
        killed.wait()
    # Any engine starting afterwards (here the CLI's) closes it.
    result = cli.invoke(app, ["--db", db_url, "--user", "bob", "--json", "executions", "show", orphan])
    shown = json.loads(result.stdout)
    assert (shown["status"], shown["reason"]) == ("failed", "interrupted")
    assert "ended before it finished" in shown["error"]
