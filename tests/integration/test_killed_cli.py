"""`kill -9` of a CLI in the middle of a BUILD, with the probe server over stdio, on SQLite and
PostgreSQL: the server dies with the CLI (Linux) instead of running the abandoned call to its end, and
the running step's execution is closed as interrupted at the same moment, and by the same rule,
as its run (or, read first, by the active list itself). A long-lived reader (as the API server
is) has the store open before the kill, so no engine starts on the store afterwards."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from _support.mcp_harness import probe_config, stuck_config

from toolagent.mcp.server_process import supported
from toolagent.store import open_store
from toolagent.store.executions import ExecutionStore

pytestmark = pytest.mark.timeout(120)

#: Far longer than the test: a server still alive at the end would still be in the call.
CALL_S = 90
TOOLAGENT = Path(sys.executable).parent / "toolagent"


@dataclass
class KilledBuild:
    """A CLI BUILD stopped by SIGKILL while its step's call ran in the probe server."""

    cli: subprocess.Popen[str]
    server_pid: int


def wait_for_line(fd: int, guard_s: float = 60) -> dict[str, Any]:
    """The next JSON line the probe writes to its log FIFO (a hang guard, not a timing)."""
    data = b""
    while b"\n" not in data:
        ready, _, _ = select.select([fd], [], [], guard_s)
        assert ready, f"the probe wrote no event in {guard_s} s"
        chunk = os.read(fd, 4096)
        assert chunk, "the probe closed its log before its call started"
        data += chunk
    return json.loads(data.split(b"\n", 1)[0])


def exited(pid: int, guard_s: float) -> bool:
    """`pid` exits within `guard_s` (a hang guard): waits on a pidfd, without polling."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], guard_s)[0])
    finally:
        os.close(fd)


@pytest.fixture
def start_build(tmp_path: Path, db_url: str) -> Iterator[Any]:
    started: list[KilledBuild] = []

    def start(name: str, tool: str = "probe/sleep") -> KilledBuild:
        fifo = tmp_path / f"{name}.fifo"
        os.mkfifo(fifo)
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        servers = tmp_path / f"{name}.json"
        config = {"probe": probe_config(fifo, risk="safe"), "stuck": stuck_config(fifo, risk="safe")}
        servers.write_text(json.dumps({"mcpServers": config}))
        agent = tmp_path / f"{name}.yaml"
        agent.write_text(
            yaml.safe_dump(
                {
                    "metadata": {"name": name},
                    "configuration": {"tools": [tool], "toolParams": {tool: {"seconds": CALL_S}}},
                }
            )
        )
        cli = subprocess.Popen(
            [str(TOOLAGENT), "--db", db_url, "--servers", str(servers), "build", str(agent)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        event = wait_for_line(fd)
        assert event["event"] == "call" and event["tool"] == tool.split("/")[1], event
        build = KilledBuild(cli, int(event["pid"]))
        started.append(build)
        return build

    yield start
    for build in started:
        build.cli.kill()
        build.cli.wait()
        if not exited(build.server_pid, 0):
            os.kill(build.server_pid, signal.SIGKILL)


@pytest.mark.skipif(not supported(), reason="the parent-death signal is Linux's")
def test_the_stdio_server_dies_with_the_killed_cli(start_build: Any) -> None:
    # `busy` blocks the server: it sees neither the cancellation nor the end of its stdin.
    build = start_build("orphan", "stuck/busy")
    build.cli.kill()
    assert build.cli.wait(timeout=30) == -signal.SIGKILL
    assert exited(build.server_pid, guard_s=30), f"server {build.server_pid} outlived its CLI, still in its call"


def test_the_running_step_is_closed_with_its_run(start_build: Any, db_url: str) -> None:
    async def body() -> None:
        async with open_store(db_url) as store:  # the long-lived reader: opened before the kills
            executions = ExecutionStore(store.db)
            first, second = start_build("first"), start_build("second")
            running = {e.run_id: e for e in await executions.running()}
            runs = {r.id: r for r in await store.runs.list_runs(status="running")}
            assert len(running) == 2 and set(running) == set(runs)
            for build in (first, second):
                build.cli.kill()
                build.cli.wait(timeout=30)
            by_pid = {r.owner_pid: r.id for r in runs.values()}
            first_run, second_run = by_pid[first.cli.pid], by_pid[second.cli.pid]

            # Reading the run closes it, and its running step's execution with it, at the same moment.
            run = await store.runs.get_run(first_run)
            execution = await executions.get(running[first_run].id)
            assert run.status == "failed" and run.error is not None and run.error.startswith("interrupted: ")
            assert execution is not None and (execution.status, execution.reason) == ("failed", "interrupted")
            assert execution.ended_at == run.ended_at
            assert execution.error is not None and execution.error.split(": ", 1)[1] == run.error.split(": ", 1)[1]

            # Reading the active list first closes the other one just the same.
            assert await executions.running() == []
            other = await executions.get(running[second_run].id)
            assert other is not None and (other.status, other.reason) == ("failed", "interrupted")

    anyio.run(body)
