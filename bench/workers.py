"""BUILD runs on workers (procrastinate on PostgreSQL) against the same runs in process.

Prints:
  1. enqueue-to-start latency on an idle worker (p50, p95 in ms): from the run stored `queued`
     to the worker's claim (target: p50 under 25 ms);
  2. runs/s for no-op runs (one call that answers at once) and 4-step runs (four calls that each
     wait `--io-ms` on I/O), with 1, 2 and 4 worker processes (`--concurrency` runs each), and
     the same runs in this process under the same total concurrency per worker (target: 2
     workers at least 1.6x one worker on the I/O runs). The default wait (500 ms a step) keeps
     those runs waiting on I/O on a small machine: with 50 ms steps, a step's own CPU (gate,
     limits, two recorded transactions, the MCP round trip) is about as long as its wait, and
     on two busy cores the figure measures CPU shares instead;
  3. cancel-to-recorded latency (p50, p95 in ms): from `runs cancel`'s request (procrastinate
     abort plus the store's cancel flags) to the run stored `cancelled`.

Every call goes through the whole tool stack (gate, limits, records, audit) to a real stdio MCP
server (tests/servers/queue_server.py) started once per process.

Run: .venv/bin/python bench/workers.py [--runs N] [--samples N] [--concurrency N] [--io-ms MS]
PostgreSQL: TOOLAGENT_TEST_PG_URL (a fresh database is made on it), else a throwaway cluster
started with scripts/pg-cluster.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa
import yaml

REPO = Path(__file__).resolve().parents[1]
SERVER = REPO / "tests" / "servers" / "queue_server.py"
sys.path.insert(0, str(REPO / "src"))

from toolagent.agents import load_definition_text, record_from_definition  # noqa: E402
from toolagent.agents.loaders import LoadedAgent  # noqa: E402
from toolagent.engine import EngineConfig  # noqa: E402
from toolagent.engine.principals import Principals  # noqa: E402
from toolagent.runs import plan_build  # noqa: E402
from toolagent.runtime import Runtime, open_runtime  # noqa: E402
from toolagent.store import open_store  # noqa: E402
from toolagent.tools.base import CallContext  # noqa: E402
from toolagent.workers import submit_run  # noqa: E402

FINAL = ("success", "failed", "cancelled")


def plan(tools: list[str], params: dict[str, Any]) -> Any:
    doc = {"metadata": {"name": "bench", "version": "1.0.0"}, "configuration": {"tools": tools, "toolParams": params}}
    text = yaml.safe_dump(doc)
    defn = load_definition_text(text)
    return plan_build(LoadedAgent(defn, record_from_definition(defn, text, org="bench"), "bench"))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Workers:
    """Worker processes on one store."""

    def __init__(self, url: str, servers: Path, concurrency: int) -> None:
        self.url, self.servers, self.concurrency = url, servers, concurrency
        self.procs: list[tuple[subprocess.Popen[str], list[str]]] = []

    async def start(self, n: int) -> None:
        for _ in range(n):
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
                    str(self.concurrency),
                    "--shutdown-grace",
                    "5",
                ],
                env={**os.environ, "PYTHONPATH": str(REPO / "src"), "TOOLAGENT_LOG_LEVEL": "error"},
                stderr=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
            lines: list[str] = []
            threading.Thread(target=lambda p=proc, ls=lines: [ls.append(x) for x in p.stderr], daemon=True).start()  # type: ignore[union-attr]
            self.procs.append((proc, lines))
        with anyio.fail_after(120):
            while not all(any(" ready on " in x for x in ls) for _, ls in self.procs):
                await anyio.sleep(0.05)

    async def stop(self) -> None:
        for proc, _ in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            await anyio.to_thread.run_sync(lambda p=proc: p.wait(30))
        self.procs = []


_LEFT = sa.text("SELECT count(*) FROM runs WHERE id = ANY(:ids) AND status NOT IN ('success', 'failed', 'cancelled')")


async def wait_final(store: Any, ids: list[str]) -> None:
    # One count per poll: reading whole run rows this often would take CPU from the workers.
    with anyio.fail_after(600):
        while True:
            async with store.db.begin() as conn:
                if not await conn.scalar(_LEFT, {"ids": ids}):
                    return
            await anyio.sleep(0.02)


async def bench(url: str, args: argparse.Namespace, tmp: Path) -> None:
    servers = tmp / "mcp.json"
    servers.write_text(
        json.dumps({"mcpServers": {"q": {"command": sys.executable, "args": [str(SERVER)], "risk": "safe"}}})
    )
    # No rate limit or budget: the figures are the queue's and the stack's, not the plan's limits.
    unlimited = {"plans": {"enterprise": {"level": "admin", "rate_per_minute": None, "monthly_budget": None}}}
    engine_file = tmp / "engine.yaml"
    engine_file.write_text(yaml.safe_dump(unlimited))
    os.environ["TOOLAGENT_ENGINE_CONFIG"] = str(engine_file)
    io_s = args.io_ms / 1000
    noop = plan(["q/noop"], {})
    io4 = plan([f"q/io-{i}" for i in range(1, 5)], {f"q/io-{i}": {"seconds": io_s} for i in range(1, 5)})
    long = plan(["q/wait"], {"q/wait": {"seconds": 60}})
    async with open_store(url) as store:
        principals = Principals(store.db, EngineConfig.load())
        me = await principals.add_user("bench", level="admin", plan="enterprise")
        workers = Workers(url, servers, args.concurrency)

        # 1. enqueue-to-start on an idle worker
        await workers.start(1)
        for _ in range(3):  # warm: the worker's MCP server starts on first use
            await wait_final(store, [await submit_run(store, noop, {}, me)])
        latencies = []
        for _ in range(args.samples):
            run_id = await submit_run(store, noop, {}, me)
            await wait_final(store, [run_id])
            row = await store.runs.get_run(run_id)
            assert row.queued_at is not None
            latencies.append((row.started_at - row.queued_at).total_seconds() * 1000)
        print(
            f"enqueue-to-start, idle worker ({args.samples} runs): p50 {pct(latencies, 0.5):.1f} ms, "
            f"p95 {pct(latencies, 0.95):.1f} ms"
        )

        # 3. cancel-to-recorded (same single worker)
        cancels = []
        for _ in range(max(3, args.samples // 5)):
            run_id = await submit_run(store, long, {}, me)
            with anyio.fail_after(30):
                while (await store.runs.get_steps(run_id))[0].status != "running":
                    await anyio.sleep(0.01)
            await anyio.sleep(0.05)  # the call has reached the server
            t0 = time.perf_counter()
            async with Runtime(store, config=EngineConfig.load()) as rt:  # as `toolagent runs cancel` does
                await store.queue.abort_job(run_id)
                await rt.cancel_run(run_id, me, wait_s=0)
                with anyio.fail_after(30):
                    while (await store.runs.get_run(run_id)).status != "cancelled":
                        await anyio.sleep(0.005)
            cancels.append((time.perf_counter() - t0) * 1000)
        print(
            f"cancel-to-recorded ({len(cancels)} runs): p50 {pct(cancels, 0.5):.0f} ms, p95 {pct(cancels, 0.95):.0f} ms"
        )
        await workers.stop()

        # 2. throughput
        print(
            f"\nruns/s ({args.runs} runs each; {args.concurrency} runs at once per worker; 4-step runs wait "
            f"{args.io_ms:g} ms per step):"
        )
        print(f"{'':>14} {'no-op':>8} {'4-step':>8}")
        one: dict[str, float] = {}
        for n in (1, 2, 4):
            await workers.start(n)
            for _ in range(2 * n):  # warm every worker's server
                await wait_final(store, [await submit_run(store, noop, {}, me) for _ in range(n)])
            figures = {}
            for name, p in (("no-op", noop), ("4-step", io4)):
                t0 = time.perf_counter()
                ids = [await submit_run(store, p, {}, me) for _ in range(args.runs)]
                await wait_final(store, ids)
                figures[name] = args.runs / (time.perf_counter() - t0)
            await workers.stop()
            if n == 1:
                one = figures
            ratio = f"  ({figures['4-step'] / one['4-step']:.2f}x one worker on 4-step)" if n > 1 else ""
            print(f"{n} worker(s):{'':>2} {figures['no-op']:>8.1f} {figures['4-step']:>8.1f}{ratio}")

        # in process, the same runs under one worker's concurrency
        async with open_runtime(store=store, servers=str(servers)) as rt:
            runner = rt.runner(CallContext(me))
            limiter = anyio.CapacityLimiter(args.concurrency)
            await runner.run(noop, {})
            figures = {}
            for name, p in (("no-op", noop), ("4-step", io4)):

                async def one_run(p: Any = p) -> None:
                    async with limiter:
                        await runner.run(p, {})

                t0 = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for _ in range(args.runs):
                        tg.start_soon(one_run)
                figures[name] = args.runs / (time.perf_counter() - t0)
            print(f"in process:{'':>3} {figures['no-op']:>8.1f} {figures['4-step']:>8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=32, help="Runs per throughput figure.")
    parser.add_argument("--samples", type=int, default=30, help="Runs for the latency figures.")
    parser.add_argument("--concurrency", type=int, default=4, help="Runs at once per worker.")
    parser.add_argument("--io-ms", type=float, default=500.0, help="How long each step of a 4-step run waits.")
    args = parser.parse_args()
    base = os.environ.get("TOOLAGENT_TEST_PG_URL")
    cluster = None
    if not base:
        cluster = tempfile.mkdtemp(prefix="bench-pg-")
        os.chmod(cluster, 0o755)
        base = subprocess.check_output([str(REPO / "scripts" / "pg-cluster.sh"), "start", cluster], text=True).strip()
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:8]}"
    plain = base.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = base.rpartition("/")[0] + "/" + name
    print(f"{os.cpu_count()} CPU(s); load average at start {', '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            anyio.run(bench, url, args, Path(tmp))
        print(f"\nload average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if cluster:
            subprocess.run([str(REPO / "scripts" / "pg-cluster.sh"), "stop", cluster], check=False)


if __name__ == "__main__":
    main()
