"""What the execution engine's gate and history cost.

Prints:
  1. the pure decision (`Policy.decide`): cost per check, p50 and p99 in
     microseconds, for an allowed and a denied call, and the registry lookup of a tool's risk
     (target: p50 under 50 us); and, per database, a whole `execute` of a tool that answers at
     once (the engine's own cost: gate, limits, records, audit, totals), one at a time and from
     `--clients` concurrent tasks (calls/s, latency, CPU per call: what group commit batches),
     the audit chain verified after the load;
  2. history over generated executions (default 1,000,000) on SQLite and on PostgreSQL: p50 and
     p95 in milliseconds of pages with each filter, deep offsets, an admin's view of everyone,
     the statistics the API returns with a page, and one metrics snapshot (target: pages under
     50 ms p95).

Rows are loaded with executemany (SQLite) and COPY (PostgreSQL) into the migrated schema with
the `executions` indexes dropped, which are then rebuilt and the tables analyzed.

Run: .venv/bin/python bench/engine.py [--rows N] [--samples N] [--only sqlite|postgres]
     [--clients N] [--seconds S]   (the concurrent execute() phase)
     [--execute-only]               (execute() only: no gate or history part)
PostgreSQL: TOOLAGENT_TEST_PG_URL, else a throwaway cluster started with scripts/pg-cluster.sh.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import secrets
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from toolagent.engine import Engine, EngineConfig, HistoryQuery, Principal
from toolagent.engine.principals import ApiKey
from toolagent.engine.registry import Registry
from toolagent.model.entry import ToolEntry
from toolagent.model.spec import ToolResult, ToolSpec
from toolagent.policy import Policy
from toolagent.store import open_store
from toolagent.tools.base import CallContext

REPO = Path(__file__).resolve().parents[1]
CATEGORY_OF = {"file": "file", "web": "web", "shell": "shell", "db": "database", "browser": "browser"}
TOOLS = [f"{ns}/{verb}{i}" for ns in CATEGORY_OF for verb in ("read", "write") for i in range(5)]  # 50 tools
USERS = [f"user{i:03d}" for i in range(100)]
HEAVY = "user000"  # a tenth of all rows
START = datetime(2025, 1, 1, tzinfo=UTC)
SPAN_S = 90 * 86400
COLUMNS = (
    "id",
    "tool",
    "category",
    "risk",
    "status",
    "denied",
    "user_name",
    "level",
    "arguments",
    "timeout_ms",
    "started_at",
    "ended_at",
    "duration_ms",
    "result",
)
RESULT = json.dumps(
    {"isError": False, "structuredContent": None, "content": [{"type": "text", "text": "ok"}], "text": "ok"}
)


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- 1. the gate ---------------------------------------------------------------------------------


def bench_gate(samples: int) -> None:
    """Time single gate checks with the monotonic nanosecond clock."""
    policy = Policy()
    admin, basic = Principal("bob", "admin", "enterprise"), Principal("bob", "execute_basic", "enterprise")
    now = datetime.now(UTC)
    step = CallContext(
        admin,
        api_key=ApiKey("key_1", "bob", "ta_x", ("agent:execute:shell",), now),
        agent_tools=frozenset({"shell/exec", "file/read"}),
    )
    shell = ToolEntry(ToolSpec("shell/exec", "shell", "exec"), "shell", "dangerous", "table")
    read = ToolEntry(ToolSpec("file/read", "file", "read"), "file", "safe", "table")
    cases: dict[str, Callable[[], Any]] = {
        "decide, allowed (admin, dangerous, BUILD step, API key)": lambda: policy.decide(
            admin, shell, args={}, context=step
        ),
        "decide, allowed (execute_basic, safe)": lambda: policy.decide(basic, read),
        "decide, denied (execute_basic, dangerous)": lambda: policy.decide(basic, shell),
    }
    registry = Registry()
    specs = [ToolSpec(name=t, server=t.split("/")[0], tool=t.split("/")[1]) for t in TOOLS]
    registry.update(specs)
    spec = specs[7]
    cases["registry lookup of a tool's risk and category"] = lambda: registry.entry_for(spec)
    print(f"gate: {samples} checks each")
    for label, fn in cases.items():
        for _ in range(1000):
            fn()
        times: list[float] = []
        clock = time.perf_counter_ns
        for _ in range(samples):
            t0 = clock()
            fn()
            times.append((clock() - t0) / 1000)
        p50, p99 = pct(times, 0.5), pct(times, 0.99)
        print(f"  {label:<58} p50 {p50:6.2f} us  p99 {p99:6.2f} us  {'ok' if p50 < 50 else 'OVER TARGET (50 us)'}")


async def bench_execute(url: str, calls: int) -> None:
    """Time whole `execute` calls of a tool that answers at once: the engine's own cost per call
    (gate, limits, running record, audit rows, final record and totals, events)."""
    spec = ToolSpec(name="file/read", server="file", tool="read")

    async def instant(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(False, None, [], "ok")

    unlimited = EngineConfig.from_data({"plans": {"enterprise": {"rate_per_minute": None}}})
    async with open_store(url) as store, Engine(store, config=unlimited) as engine:
        me = await engine.principals.add_user("bench", level="admin", plan="enterprise")
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            await engine.execute(spec, {"path": f"/tmp/{i}"}, me, instant)
            times.append((time.perf_counter() - t0) * 1000)
    print(f"  execute() of an instant tool, {calls} calls: p50 {pct(times, 0.5):.2f} ms  p95 {pct(times, 0.95):.2f} ms")


async def bench_concurrent(url: str, clients: int, seconds: float) -> None:
    """`clients` tasks looping `execute` of an instant tool for `seconds`: calls/s and latency
    under concurrency (what group commit batches), then the audit chain's verification."""
    spec = ToolSpec(name="file/read", server="file", tool="read")

    async def instant(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(False, None, [], "ok")

    unlimited = EngineConfig.from_data({"plans": {"enterprise": {"rate_per_minute": 100_000_000}}})
    async with open_store(url) as store, Engine(store, config=unlimited) as engine:
        me = await engine.principals.add_user(f"bench-{secrets.token_hex(3)}", level="admin", plan="enterprise")
        times: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds

        async def client(n: int) -> None:
            nonlocal errors
            i = 0
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                out = await engine.execute(spec, {"path": f"/tmp/{n}/{i}"}, me, instant)
                times.append((time.perf_counter() - t0) * 1000)
                errors += out.status != "success"
                i += 1

        t0 = time.perf_counter()
        cpu0 = time.process_time()
        async with anyio.create_task_group() as tg:
            for n in range(clients):
                tg.start_soon(client, n)
        took, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        verified = await engine.audit.verify() if engine.audit is not None else None
    print(
        f"  execute() x {clients} concurrent, {seconds:g} s: {len(times) / took:,.0f} calls/s  "
        f"p50 {pct(times, 0.5):.2f} ms  p95 {pct(times, 0.95):.2f} ms  cpu {cpu / max(1, len(times)) * 1000:.2f} ms/call  "
        f"errors {errors}  audit chain {'verifies' if verified is None or verified.ok else 'BROKEN'}"
    )


# -- 2. history ----------------------------------------------------------------------------------


def generate(n: int, seed: int = 7) -> Iterator[tuple[Any, ...]]:
    """`n` executions: 10% of them one heavy user's, 90% success, 7% failed, 3% cancelled; one in
    2,000 (the heavy user's) still running, which the history's reads take in a part of their own."""
    rnd = random.Random(seed)
    for i in range(n):
        user = HEAVY if i % 10 == 0 else USERS[1 + rnd.randrange(len(USERS) - 1)]
        tool = TOOLS[rnd.randrange(len(TOOLS))]
        roll = rnd.random()
        status = "success" if roll < 0.90 else "failed" if roll < 0.97 else "cancelled"
        started = START + timedelta(seconds=rnd.random() * SPAN_S)
        duration: float | None = rnd.expovariate(1 / 120.0)
        ended: datetime | None = started + timedelta(milliseconds=duration)
        if i % 2000 == 0:
            status, ended, duration = "running", None, None
        yield (
            f"exec_{int(started.timestamp() * 1000)}_{i:08x}",
            tool,
            CATEGORY_OF[tool.split("/")[0]],
            "safe" if "read" in tool else "dangerous",
            status,
            False,
            user,
            "admin",
            json.dumps({"path": f"/data/file_{i}.txt"}),
            30000,
            started,
            ended,
            duration,
            RESULT if ended else None,
        )


def load_sqlite(path: Path, n: int) -> float:
    """Bulk-load into the migrated SQLite file; returns seconds."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(path)
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type='index' AND tbl_name='executions' AND sql IS NOT NULL"
    ).fetchall()
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    conn.execute("PRAGMA synchronous=OFF")
    sql = f"INSERT INTO executions ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    batch: list[tuple[Any, ...]] = []
    # SQLAlchemy keeps SQLite datetimes as naive UTC text in this form.
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    for r in generate(n):
        batch.append((*r[:10], r[10].strftime(fmt), r[11] and r[11].strftime(fmt), *r[12:]))
        if len(batch) == 50_000:
            conn.executemany(sql, batch)
            batch.clear()
    if batch:
        conn.executemany(sql, batch)
    conn.commit()
    for _, create in indexes:
        conn.execute(create)
    conn.execute("ANALYZE")
    conn.commit()
    conn.close()
    return time.perf_counter() - t0


def load_postgres(url: str, n: int) -> float:
    """Bulk-load with COPY into the migrated PostgreSQL database; returns seconds."""
    import psycopg

    t0 = time.perf_counter()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions' AND indexname LIKE 'ix_%'"
        ).fetchall()
        for name, _ in indexes:
            conn.execute(f'DROP INDEX "{name}"')
        with conn.cursor() as cur, cur.copy(f"COPY executions ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for r in generate(n):
                copy.write_row(r)
        for _, create in indexes:
            conn.execute(create)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE executions")
    return time.perf_counter() - t0


async def timed(fn: Callable[[], Awaitable[Any]], samples: int) -> tuple[float, float]:
    """p50 and p95 in ms of `samples` runs after two warm-up runs."""
    for _ in range(2):
        await fn()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        await fn()
        times.append((time.perf_counter() - t0) * 1000)
    return pct(times, 0.5), pct(times, 0.95)


async def rebuild_totals(url: str) -> float:
    """Recount the metrics totals from the loaded rows; returns seconds."""
    async with open_store(url) as store:
        t0 = time.perf_counter()
        await Engine(store, audit=None).executions.rebuild_totals()
        return time.perf_counter() - t0


async def bench_history(url: str, rows: int, samples: int) -> None:
    """Time history pages, statistics and a metrics snapshot."""
    heavy = Principal(HEAVY, "execute_basic", "team")
    admin = Principal("root", "admin", "enterprise")
    week = (START + timedelta(days=30), START + timedelta(days=37))
    pages: dict[str, tuple[Principal, HistoryQuery]] = {
        f"own page ({rows // 10:,} rows), newest 50": (heavy, HistoryQuery()),
        "own, tool filter": (heavy, HistoryQuery(tool="web/read3")),
        "own, status failed": (heavy, HistoryQuery(status="failed")),
        "own, category + one week": (heavy, HistoryQuery(category="shell", since=week[0], until=week[1])),
        "own, offset 5,000": (heavy, HistoryQuery(offset=5000)),
        "own, tool filter, offset 1,000": (heavy, HistoryQuery(tool="web/read3", offset=1000)),
        f"admin, everyone ({rows:,} rows), newest 100": (admin, HistoryQuery(all_users=True, limit=100)),
        "admin, everyone, tool filter": (admin, HistoryQuery(all_users=True, tool="file/write2")),
        "admin, everyone, status cancelled": (admin, HistoryQuery(all_users=True, status="cancelled")),
        "admin, one user + status": (admin, HistoryQuery(user="user042", status="success")),
    }
    async with open_store(url) as store:
        engine = Engine(store, audit=None)
        print(f"  {'history page (rows only)':<44} {'p50 ms':>8} {'p95 ms':>8}")
        for name, (who, query) in pages.items():
            p50, p95 = await timed(functools.partial(engine.history_store.rows, who, query), samples)
            print(f"  {name:<44} {p50:8.2f} {p95:8.2f}  {'ok' if p95 < 50 else 'OVER TARGET (50 ms)'}")
        print(f"  {'page + totalCount + stats (the API answer)':<44}")
        for name in (
            f"own page ({rows // 10:,} rows), newest 50",
            "own, tool filter",
            "own, category + one week",
            f"admin, everyone ({rows:,} rows), newest 100",
        ):
            who, query = pages[name]
            p50, p95 = await timed(functools.partial(engine.history, who, query), samples)
            print(f"  {name:<44} {p50:8.2f} {p95:8.2f}")
        snap = await engine.metrics()
        p50, p95 = await timed(engine.metrics, max(5, samples // 5))
        print(
            f"  {'metrics snapshot (every tool, p50/p95 each)':<44} {p50:8.2f} {p95:8.2f}  "
            f"({sum(t.invocations for t in snap.tools):,} invocations, {len(snap.tools)} tools)"
        )


async def prepare(url: str) -> None:
    async with open_store(url):
        pass


def sqlite_part(args: argparse.Namespace) -> None:
    rows, samples = args.rows, args.samples
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        url = f"sqlite+aiosqlite:///{path}"
        anyio.run(prepare, url)
        print("SQLite: execute()")
        anyio.run(bench_execute, url, 500)
        anyio.run(bench_concurrent, url, args.clients, args.seconds)
        if args.execute_only:
            return
        took = load_sqlite(path, rows)
        recount = anyio.run(rebuild_totals, url)
        print(
            f"SQLite {sqlite3.sqlite_version}: {rows:,} executions loaded and indexed in {took:.1f} s, "
            f"metrics totals recounted in {recount:.1f} s"
        )
        anyio.run(bench_history, url, rows, samples)


def postgres_url() -> tuple[str, Callable[[], None]]:
    """A server URL and how to stop it (a no-op for TOOLAGENT_TEST_PG_URL)."""
    url = os.environ.get("TOOLAGENT_TEST_PG_URL")
    if url:
        return url, lambda: None
    folder = tempfile.mkdtemp(prefix="toolagent-bench-pg.")
    os.chmod(folder, 0o755)
    script = REPO / "scripts" / "pg-cluster.sh"
    url = subprocess.run([str(script), "start", folder], check=True, capture_output=True, text=True).stdout.strip()

    def stop() -> None:
        subprocess.run([str(script), "stop", folder], check=False)

    return url, stop


def postgres_part(args: argparse.Namespace) -> None:
    import psycopg

    rows, samples = args.rows, args.samples
    base, stop = postgres_url()
    name = f"bench_engine_{secrets.token_hex(4)}"
    admin = base.replace("postgresql+psycopg://", "postgresql://")
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = base.rsplit("/", 1)[0] + "/" + name
        try:
            anyio.run(prepare, url)
            print("PostgreSQL: execute()")
            anyio.run(bench_execute, url, 500)
            anyio.run(bench_concurrent, url, args.clients, args.seconds)
            if args.execute_only:
                return
            took = load_postgres(url, rows)
            recount = anyio.run(rebuild_totals, url)
            with psycopg.connect(admin) as conn:
                version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
            print(
                f"PostgreSQL {version}: {rows:,} executions loaded with COPY and indexed in {took:.1f} s, "
                f"metrics totals recounted in {recount:.1f} s"
            )
            anyio.run(bench_history, url, rows, samples)
        finally:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000, help="Executions to generate (default 1,000,000).")
    parser.add_argument("--samples", type=int, default=50, help="Timed runs per history query (default 50).")
    parser.add_argument("--gate-samples", type=int, default=100_000, help="Timed gate checks per case.")
    parser.add_argument("--only", choices=("sqlite", "postgres"), help="Run one database only.")
    parser.add_argument("--clients", type=int, default=100, help="Concurrent execute() tasks (default 100).")
    parser.add_argument("--seconds", type=float, default=5.0, help="Length of the concurrent phase (default 5).")
    parser.add_argument("--execute-only", action="store_true", help="Time execute() only: no gate or history part.")
    args = parser.parse_args()
    if not args.execute_only:
        bench_gate(args.gate_samples)
    if args.only in (None, "sqlite"):
        sqlite_part(args)
    if args.only in (None, "postgres"):
        postgres_part(args)


if __name__ == "__main__":
    main()
