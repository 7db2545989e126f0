"""Worker processes on one PostgreSQL store, the CLI in a thread, and waits on run states: the
harness of the worker integration tests."""

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
from typer.testing import CliRunner

from _support.repo import REPO_ROOT, seconds_to_a_fresh_minute
from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.cli import app
from toolagent.engine import EngineConfig
from toolagent.engine.principals import Principal, Principals
from toolagent.model.status import RunStatus
from toolagent.runs import plan_build
from toolagent.store import RunRow, Store, open_store
from toolagent.workers import submit_run

SERVER = REPO_ROOT / "tests" / "servers" / "queue_server.py"
LIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
#: Seconds without a heartbeat before a worker counts as stopped, in these tests.
STALLED_S = "2"


def plan(tools: list[str], params: dict[str, Any] | None = None, **config: Any) -> Any:
    doc = {
        "metadata": {"name": "fleet", "version": "1.0.0"},
        "configuration": {"tools": tools, "toolParams": params or {}, **config},
    }
    text = yaml.safe_dump(doc)
    defn = load_definition_text(text)
    return plan_build(LoadedAgent(defn, record_from_definition(defn, text, org="tests"), "fleet"))


@dataclass
class Worker:
    """A `toolagent worker` process and what it printed."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)

    def read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    async def ready(self) -> None:
        with anyio.fail_after(60):
            while not any(" ready on " in line for line in self.lines):
                assert self.proc.poll() is None, "\n".join(self.lines)
                await anyio.sleep(0.05)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    async def exited(self) -> int:
        with anyio.fail_after(60):
            while self.proc.poll() is None:
                await anyio.sleep(0.05)
        return int(self.proc.returncode)


@dataclass
class Fleet:
    """A PostgreSQL store, the test server's config and log, and the worker processes."""

    url: str
    tmp: Path
    workers: list[Worker] = field(default_factory=list)
    # No plan limit by default: 50 runs would pass the default plan's calls per minute.
    engine_config: dict[str, Any] = field(
        default_factory=lambda: {
            "plans": {"enterprise": {"level": "execute_advanced", "rate_per_minute": None, "monthly_budget": None}}
        }
    )

    @property
    def log(self) -> Path:
        return self.tmp / "calls.jsonl"

    @property
    def servers(self) -> Path:
        path = self.tmp / "mcp.json"
        path.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "q": {
                            "command": sys.executable,
                            "args": [str(SERVER)],
                            "env": {"QUEUE_LOG": str(self.log)},
                            "risk": {"noop": "safe", "wait": "safe", "wait-once": "safe", "write": "moderate"},
                        }
                    }
                }
            )
        )
        return path

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), "TOOLAGENT_WORKER_STALLED_S": STALLED_S}
        path = self.tmp / "engine.yaml"
        path.write_text(yaml.safe_dump(self.engine_config))
        env["TOOLAGENT_ENGINE_CONFIG"] = str(path)
        return env

    async def start(
        self,
        *,
        concurrency: int = 4,
        grace_s: float = 10.0,
        queues: str = "builds,tools",
        env: dict[str, str] | None = None,
    ) -> Worker:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from toolagent.cli import main; main()",
                "--db",
                self.url,
                "--servers",
                str(self.servers),
                "worker",
                "--concurrency",
                str(concurrency),
                "--shutdown-grace",
                str(grace_s),
                "--queues",
                queues,
            ],
            env={**self.env(), **(env or {})},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            cwd=self.tmp,
        )
        worker = Worker(proc)
        threading.Thread(target=worker.read, daemon=True).start()
        self.workers.append(worker)
        await worker.ready()
        return worker

    def calls(self, tool: str, event: str = "call") -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines() if line.strip()]
        return [r for r in rows if r["tool"] == tool and r["event"] == event]

    def stop_all(self) -> None:
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait(10)


@pytest.fixture()
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(pg_url, tmp_path)
    try:
        yield f
    finally:
        f.stop_all()


@asynccontextmanager
async def store_of(fleet: Fleet) -> AsyncIterator[tuple[Store, Principal]]:
    async with open_store(fleet.url) as store:
        principals = Principals(store.db, EngineConfig())
        try:
            me = await principals.get_user("alice")
        except Exception:
            me = await principals.add_user("alice", level="admin", plan="enterprise")
        yield store, me


async def until_final(store: Store, run_ids: list[str], timeout_s: float = 90) -> list[RunRow]:
    with anyio.fail_after(timeout_s):
        while True:
            rows = [await store.runs.get_run(r) for r in run_ids]
            if all(r.status not in LIVE for r in rows):
                return rows
            await anyio.sleep(0.1)


async def until(predicate: Any, timeout_s: float = 60) -> None:
    with anyio.fail_after(timeout_s):
        while not await predicate():
            await anyio.sleep(0.05)


async def cli(fleet: Fleet, *args: str, db: str | None = None) -> Any:
    """The CLI in a thread of its own (it runs its own event loop)."""
    argv = ["--db", db or fleet.url, "--servers", str(fleet.servers), "--json", *args]
    env = {"TOOLAGENT_USER": "alice", "TOOLAGENT_WORKER_STALLED_S": STALLED_S}
    return await anyio.to_thread.run_sync(lambda: CliRunner().invoke(app, argv, env=env))
