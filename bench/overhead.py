"""How much a BUILD step costs over a raw MCP SDK call to the same server, side by side.

Prints, for one benchmark server over stdio (bench/bench_server.py) in one process:
  1. one step's latency inside a BUILD run vs a raw `ClientSession.call_tool`: the MCP SDK's own
     session, warm, to another process of the same server (toolagent's sessions check results
     faster, `mcp/checked_session.py`, which is part of what is measured): median, p95 and the
     ratio of medians (target: at most 1.20);
  2. a sequential run of 100 echo steps vs 100 sequential raw calls (target: at most 1.3x);
  3. a parallel run of 100 steps that each sleep 50 ms vs 100 concurrent raw calls (target: 1.3x);
  4. a BUILD step through the whole tool stack (gate, limits, execution record and audit,
     timeout, retries, SQL guard, schema check) inside a run vs the raw call (target: at most
     1.30 on SQLite);
  5. a sequential run of 100 echo steps through the whole tool stack vs 100 sequential raw calls
     (no target: what a governed chain costs per step, where each step's outcome write commits
     with the next step's admission).

Rows 1-3 run the steps through the tool stack without its governing layers (timeout, retries,
SQL guard, schema check over the catalogue), which is what a step cost before the engine; row 4
is the runtime's own runner: the gate, the limits and the call's two store writes (admission,
then outcome, each committed before the step goes on) included.

Run: .venv/bin/python bench/overhead.py [--rounds N] [--db URL]
The store is a temporary SQLite file unless --db is given.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolagent._heap import tune_collector
from toolagent.agents import load_definition_text, record_from_definition
from toolagent.agents.loaders import LoadedAgent
from toolagent.engine.config import EngineConfig
from toolagent.mcp.config import ServersConfig
from toolagent.mcp.pool import ServerPool
from toolagent.runs import BuildRunner, plan_build
from toolagent.runtime import Runtime
from toolagent.store import open_store
from toolagent.tools.base import CallContext
from toolagent.tools.stack import ToolStack, build_tool_stack

HERE = Path(__file__).resolve().parent


def agent(tools: list[str], params: dict[str, Any], mode: str = "sequential") -> LoadedAgent:
    """An in-memory agent over the bench server's tools."""
    doc = {
        "metadata": {"name": "bench"},
        "configuration": {"tools": tools, "toolParams": params, "toolExecutionMode": mode},
    }
    text = yaml.safe_dump(doc)
    defn = load_definition_text(text)
    return LoadedAgent(defn, record_from_definition(defn, text, org="bench"), "bench")


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def row(
    label: str,
    ours: list[float],
    raw: list[float],
    target: float | None,
    cpu: tuple[list[float], list[float]] | None = None,
) -> None:
    """Print one comparison (and, given `cpu`, this process's CPU time per sample on each side:
    a figure other load on the machine disturbs far less than the wall-clock ratio)."""
    ratio = statistics.median(ours) / statistics.median(raw)
    verdict = (
        "(no target)" if target is None else f"(target <= {target:.2f}) " + ("ok" if ratio <= target else "OVER TARGET")
    )
    print(
        f"{label:<44} toolagent median {statistics.median(ours) * 1000:8.2f} ms  p95 {pct(ours, 0.95) * 1000:8.2f} ms | "
        f"raw median {statistics.median(raw) * 1000:8.2f} ms  p95 {pct(raw, 0.95) * 1000:8.2f} ms | "
        f"ratio {ratio:5.2f} {verdict}"
    )
    if cpu is not None:
        ours_cpu, raw_cpu = statistics.median(cpu[0]), statistics.median(cpu[1])
        print(
            f"{'':<44} CPU of this process: toolagent {ours_cpu * 1000:8.2f} ms | raw {raw_cpu * 1000:8.2f} ms | "
            f"ratio {ours_cpu / raw_cpu:5.2f}"
        )


async def run_vs_raw(
    raw: Callable[[], Awaitable[None]], runner: BuildRunner, plan: Any, rounds: int
) -> tuple[list[float], list[float], tuple[list[float], list[float]]]:
    """`rounds` of: the raw calls (`raw()`), then `plan` run by `runner`; the wall times of each
    side and this process's CPU time (ours, raw)."""
    ours: list[float] = []
    raws: list[float] = []
    cpu: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        await raw()
        raws.append(time.perf_counter() - t0)
        cpu[1].append(time.process_time() - c0)
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = await runner.run(plan)
        ours.append(time.perf_counter() - t0)
        cpu[0].append(time.process_time() - c0)
        assert outcome.ok, outcome.error
    return ours, raws, cpu


async def main(rounds: int, db: str | None) -> None:
    """Run the four comparisons."""
    server = {"command": sys.executable, "args": [str(HERE / "bench_server.py"), "stdio", "0", "100"]}
    config = ServersConfig.from_data({"mcpServers": {"bench": server}})
    with tempfile.TemporaryDirectory() as tmp:
        url = db or f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        unlimited = EngineConfig.from_data({"plans": {"enterprise": {"rate_per_minute": None}}})
        async with (
            open_store(url) as store,
            ServerPool(config) as pool,
            Runtime(store, config=unlimited, pool=pool) as runtime,
            stdio_client(StdioServerParameters(**server)) as (read, write),
            ClientSession(read, write) as session,
        ):
            me = await runtime.principals.add_user("bench", level="admin", plan="enterprise")
            await runtime.catalogue.refresh()
            bare = ToolStack(build_tool_stack(runtime.catalogue), runtime.config.default_timeout_ms)
            runner = BuildRunner(bare, store, CallContext(me))
            governed = runtime.runner(CallContext(me))
            await session.initialize()
            await session.list_tools()  # the SDK checks results against the listed output schemas
            for _ in range(20):  # warm both paths
                await session.call_tool("echo_0", {"text": "warm"})
                await runner.run(plan_build(agent(["bench/echo_0"], {"bench/echo_0": {"text": "warm"}})))

            # The runtime is ready: set the collector as `serve` and `worker` do (`toolagent._heap`:
            # start-up objects out of full collections, young ones collected less often), so a
            # collection's walk of them is not charged to whichever side happens to run it.
            tune_collector()

            # 1. one step vs one raw call, interleaved so drift hits both equally.
            one = plan_build(agent(["bench/echo_1"], {"bench/echo_1": {"text": "hello"}}))
            step_s: list[float] = []
            raw_s: list[float] = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                await session.call_tool("echo_1", {"text": "hello"})
                raw_s.append(time.perf_counter() - t0)
                outcome = await runner.run(one)
                step_s.append((outcome.steps[0].duration_ms or 0) / 1000)
            row("1. one step (inside a run) vs raw call", step_s, raw_s, 1.20)

            # 2. 100 sequential echo steps vs 100 sequential raw calls.
            names = [f"echo_{i}" for i in range(100)]
            seq = plan_build(agent([f"bench/{n}" for n in names], {f"bench/{n}": {"text": n} for n in names}))
            samples = max(5, rounds // 20)

            async def sequential_raw() -> None:
                for n in names:
                    await session.call_tool(n, {"text": n})

            seq_ours, seq_raw, seq_cpu = await run_vs_raw(sequential_raw, runner, seq, samples)
            row("2. 100 sequential steps (whole run) vs raw", seq_ours, seq_raw, 1.30, seq_cpu)

            # 3. 100 parallel 50 ms sleeps vs 100 concurrent raw calls.
            sleeps = [f"sleep_{i}" for i in range(100)]
            par = plan_build(
                agent([f"bench/{n}" for n in sleeps], {f"bench/{n}": {"ms": 50} for n in sleeps}, "parallel")
            )
            runner.max_concurrency = 100

            async def concurrent_raw() -> None:
                async with anyio.create_task_group() as tg:
                    for n in sleeps:
                        tg.start_soon(session.call_tool, n, {"ms": 50})

            par_ours, par_raw, par_cpu = await run_vs_raw(concurrent_raw, runner, par, samples)
            row("3. 100 parallel 50 ms steps (whole run) vs raw", par_ours, par_raw, 1.30, par_cpu)

            # 4. one step through the governed stack vs one raw call, interleaved.
            for _ in range(20):
                await governed.run(one)
            gov_s: list[float] = []
            raw_s = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                await session.call_tool("echo_1", {"text": "hello"})
                raw_s.append(time.perf_counter() - t0)
                outcome = await governed.run(one)
                gov_s.append((outcome.steps[0].duration_ms or 0) / 1000)
            row("4. BUILD step through the whole tool stack vs raw", gov_s, raw_s, 1.30)

            # 5. 100 sequential echo steps through the whole tool stack vs 100 sequential raw calls.
            gov_seq, gov_seq_raw, gov_seq_cpu = await run_vs_raw(sequential_raw, governed, seq, samples)
            row("5. 100 governed sequential steps vs raw", gov_seq, gov_seq_raw, None, gov_seq_cpu)
            print(f"store: {store.db.dialect}; rounds: {rounds}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200, help="samples for comparison 1 (default 200)")
    parser.add_argument("--db", help="store URL (default: a temporary SQLite file)")
    ns = parser.parse_args()
    anyio.run(main, ns.rounds, ns.db)
