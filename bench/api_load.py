"""The HTTP API under load: throughput and latency of `POST /api/tools/execute` against the same
echo tool called straight over MCP, and the rate limit's exactness under a concurrent burst.

Starts uvicorn on 127.0.0.1 (a free port) in a subprocess, with the app on a throwaway SQLite
store (or `--db URL`) and one MCP server, bench/bench_server.py over stdio (risk `safe`, so an
execute_basic user may run it), whose `echo_0` tool is called. One user is on the enterprise
plan raised to 100,000,000 calls per minute with no budget (the counter is still taken on every
call), another on a plan of Q calls per minute. Then prints:
  1. per client count N (default 100 then 1000), each for `--seconds`: N tasks over N keep-alive
     connections (httpx.AsyncClient pools of 10) looping `POST /api/tools/execute` of `bench/echo_0`,
     then the same requests to bench/_http_relay.py (a bare FastAPI route forwarding to one MCP
     session: what the HTTP layer alone costs on this machine), then N tasks sharing ONE
     `mcp.ClientSession` to another bench_server.py over stdio (the API also shares one session
     per server) looping `call_tool("echo_0")`: calls/s, p50/p95/p99
     latency, errors, and the CPU seconds each process used. Clients stop starting calls at the
     deadline and the calls under way are waited for, so a phase lasts longer than `--seconds`
     when the server queues (each of 1,000 API clients may make a single call). Then the ratio
     API/direct of the
     throughput at 100 clients (target >= 0.80) and whether 1,000 concurrent executions ran with
     no error (target);
  2. a burst of 3xQ concurrent execute calls by a user whose plan allows Q calls per minute,
     fired while other clients keep the API busy: exactly Q must answer 200 and the rest 429
     with Retry-After and X-RateLimit headers, and the store's history must agree.

The load generator runs in this process (one event loop), so on a small machine it competes
with the server for CPU in phase 1 (the printed CPU figures show how much).

Run: .venv/bin/python bench/api_load.py [--seconds S] [--clients 100,1000] [--rate-q Q] [--db URL]
     [--no-relay]       (skip the bare HTTP relay phase, bench/_http_relay.py)
     [--profile FILE]   (run the server under cProfile, dump to FILE and print its top functions)
     [--timings]        (time the server's stages: bench/_api_timing.py, patched in at start)
     [--peer contextforge [--peer-rounds R] [--peer-spec SPEC]]
                        (instead of the above: IBM's MCP ContextForge gateway side by side, see below)

Peer mode (`--peer contextforge`): installs PyPI `mcp-contextforge-gateway` into a virtualenv under
the bench's cache on first use (bench/_contextforge.py says where and which defaults it changes),
starts bench_server.py over streamable HTTP as the one upstream of both gateways, registers it in
ContextForge and in toolagent's API, then alternates R rounds (default 2) of three phases with the
same clients (100 by default, `--clients`): toolagent's `POST /api/tools/execute`, ContextForge's
`POST /rpc` `tools/call`, and the same with each client sending its own `Mcp-Session-Id` (then
ContextForge keeps one upstream session per client instead of opening one per call). It prints
each phase, the best round of each with the ratios, and the rows each one's database gained per
call. The script fails with the step and the reason if the peer cannot be installed or started.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client

from toolagent.engine.config import ENGINE_CONFIG_ENV
from toolagent.engine.principals import Principals
from toolagent.store import open_store

HERE = Path(__file__).resolve().parent
SERVER_ARGS = [str(HERE / "bench_server.py"), "stdio", "0", "1"]  # tools echo_0 and sleep_0
TOOL = "echo_0"
BODY = {"name": f"bench/{TOOL}", "arguments": {"text": "hello"}}
#: Throughput through the API over direct MCP calls, at 100 clients.
TARGET_RATIO = 0.80
#: Concurrent executions the API must hold with no error.
TARGET_CLIENTS = 1000
#: Clients of a warm-up: enough to warm caches and the session; more would only queue (1,000 calls
#: queued behind a slow server make a "1 s" warm-up last as long as the phase).
WARMUP_CLIENTS = 100
#: Connections per httpx client (see `api_clients`).
CONNECTIONS_PER_CLIENT = 10
#: Client-side timeout: long, so that queueing in the server shows as latency, not as errors.
CLIENT_TIMEOUT_S = 120.0
#: A rate window is a clock minute: a burst must not straddle two.
BURST_MARGIN_S = 20.0

#: Runs the app under uvicorn: argv = store URL, servers file, port; cProfile when BENCH_PROFILE names a file.
LAUNCH = """
import cProfile, os, signal, sys
import uvicorn
from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

db, servers, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = create_app(db=db, servers=ServersConfig.load(servers))
if os.environ.get("BENCH_TIMINGS"):
    sys.path.insert(0, os.environ["BENCH_DIR"])
    import _api_timing
    _api_timing.install()
profile = os.environ.get("BENCH_PROFILE")
if profile:
    def stop(*_):
        raise SystemExit(0)
    # uvicorn re-raises the SIGTERM it caught once it has shut down: end normally so the stats get written.
    signal.signal(signal.SIGTERM, stop)
    prof = cProfile.Profile()
    prof.enable()
try:
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=4096,
                timeout_graceful_shutdown=5)
finally:
    if profile:
        prof.disable()
        prof.dump_stats(profile)
"""


# -- measuring ------------------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """Direct child processes of `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


@dataclass
class Phase:
    """What one load phase measured."""

    label: str
    """`API`, `direct`, `warmup`, ..."""
    clients: int
    """Concurrent clients."""
    latencies_s: list[float] = field(default_factory=list)
    """One per finished call, failed ones included."""
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    """Failed calls by kind."""
    elapsed_s: float = 0.0
    """From the start until the last call ended."""
    cpu: dict[str, float] = field(default_factory=dict)
    """CPU seconds used meanwhile, per process."""
    notes: list[str] = field(default_factory=list)
    """Extra lines to print."""

    @property
    def calls(self) -> int:
        """Calls finished, failed ones included."""
        return len(self.latencies_s)

    @property
    def per_s(self) -> float:
        """Successful calls per second."""
        return (self.calls - sum(self.errors.values())) / self.elapsed_s if self.elapsed_s else 0.0

    def print(self) -> None:
        """One line of figures, then CPU use and any errors."""
        ms = [v * 1000 for v in self.latencies_s]
        print(f"  {self.label:<7} N={self.clients:<5} {self.per_s:8.0f} calls/s  p50 {pct(ms, .5):8.1f} ms  "
              f"p95 {pct(ms, .95):8.1f} ms  p99 {pct(ms, .99):8.1f} ms  calls {self.calls:6d} in {self.elapsed_s:5.1f} s  "
              f"errors {sum(self.errors.values())}")
        if self.cpu:
            per_call = {k: v / self.calls * 1000 for k, v in self.cpu.items()} if self.calls else {}
            print("          cpu s: " + ", ".join(f"{k} {v:.1f} ({per_call.get(k, 0):.2f} ms/call)" for k, v in self.cpu.items()))
        for note in self.notes:
            print(f"          {note}")
        for kind, count in self.errors.most_common(5):
            print(f"          error x{count}: {kind}")


#: One call by client number i: None on success, else an error label.
Call = Callable[[int], Awaitable[str | None]]


async def hammer(phase: Phase, call: Call, seconds: float, procs: dict[str, int]) -> Phase:
    """N tasks each calling `call` in a loop until `seconds` pass; calls started by then are waited for.

    `call` returns None on success, else an error label; exceptions are counted by type.
    """
    before = {k: cpu_s(pid) for k, pid in procs.items()}
    here = time.process_time()
    deadline = time.perf_counter() + seconds

    async def client(i: int) -> None:
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            try:
                error = await call(i)
            except Exception as exc:  # noqa: BLE001 - a load test counts failures, it does not stop on them
                error = f"{type(exc).__name__}: {str(exc)[:120]}"
            phase.latencies_s.append(time.perf_counter() - t0)
            if error is not None:
                phase.errors[error] += 1

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(phase.clients):
            tg.start_soon(client, i)
    phase.elapsed_s = time.perf_counter() - start
    phase.cpu = {"bench(client)": time.process_time() - here, **{k: cpu_s(pid) - before[k] for k, pid in procs.items()}}
    return phase


# -- the API server -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Api:
    """A running API server."""

    url: str
    pid: int
    log: Path
    timings: Path | None = None
    """Where the server writes its per-stage timings (--timings)."""

    def reset_timings(self) -> None:
        """Clear the server's per-stage timings."""
        if self.timings is not None:
            os.kill(self.pid, signal.SIGUSR1)

    async def read_timings(self) -> dict[str, tuple[int, float]]:
        """The server's per-stage timings since the last reset: stage -> (calls, total seconds)."""
        if self.timings is None:
            return {}
        self.timings.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                return {k: (int(v[0]), float(v[1])) for k, v in json.loads(self.timings.read_text()).items()}
            await anyio.sleep(0.05)
        return {}


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def provision(db: str, users: list[tuple[str, str]]) -> dict[str, str]:
    """Create `(name, plan)` users at level execute_basic with one API key each; returns name -> key."""
    keys: dict[str, str] = {}

    async def body() -> None:
        async with open_store(db) as store:
            principals = Principals(store.db)
            for name, plan in users:
                await principals.add_user(name, level="execute_basic", plan=plan)
                keys[name] = (await principals.create_key(name))[1]

    anyio.run(body)
    return keys


@contextlib.contextmanager
def api_server(workdir: Path, db: str, engine_config: dict[str, Any], profile: Path | None,
               timings: bool = False, upstream_url: str | None = None) -> Iterator[Api]:
    """uvicorn with the app and the bench server (over stdio, or the one at `upstream_url` over
    streamable HTTP) on a free port; stopped (SIGTERM) afterwards."""
    servers = workdir / "mcp.json"
    entry = ({"url": upstream_url, "risk": "safe"} if upstream_url
             else {"command": sys.executable, "args": SERVER_ARGS, "risk": "safe"})
    servers.write_text(json.dumps({"mcpServers": {"bench": entry}}))
    config = workdir / "engine.json"
    config.write_text(json.dumps(engine_config))
    env = {**os.environ, ENGINE_CONFIG_ENV: str(config)}
    if profile is not None:
        env["BENCH_PROFILE"] = str(profile)
    if timings:
        env.update(BENCH_TIMINGS=str(workdir / "timings.json"), BENCH_DIR=str(HERE))
    port = free_port()
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, db, str(servers), str(port)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    api = Api(f"http://127.0.0.1:{port}", proc.pid, log, workdir / "timings.json" if timings else None)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"API server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{api.url}/ready", timeout=2).status_code == 200:
                    break
            time.sleep(0.1)
        yield api
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def api_clients(api: Api, key: str, clients: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """HTTP clients with a connection per concurrent client, at most CONNECTIONS_PER_CLIENT each.

    Measured here against a server that queues: one httpx pool of 100 or 1,000 connections costs
    the load generator 10-15 ms of CPU per call (httpcore re-scans its connections and waiting
    requests on every request event), which on a 2-core machine takes CPU from the server being
    measured; pools of 10 cost ~2 ms.
    """
    async with contextlib.AsyncExitStack() as stack:
        pools = []
        for first in range(0, clients, CONNECTIONS_PER_CLIENT):
            size = min(CONNECTIONS_PER_CLIENT, clients - first)
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            pools.append(await stack.enter_async_context(httpx.AsyncClient(
                base_url=api.url, headers={"Authorization": f"Bearer {key}"}, limits=limits,
                timeout=httpx.Timeout(CLIENT_TIMEOUT_S))))
        yield pools


def execute(pools: list[httpx.AsyncClient]) -> Call:
    """One `POST /api/tools/execute` of the echo tool; client i uses connection pool i // CONNECTIONS_PER_CLIENT."""

    async def call(i: int) -> str | None:
        response = await pools[(i // CONNECTIONS_PER_CLIENT) % len(pools)].post("/api/tools/execute", json=BODY)
        if response.status_code == 200:
            return None
        try:
            error = response.json()["error"]
            return f"HTTP {response.status_code} {error['code']}: {error['message'][:120]}"
        except (ValueError, KeyError, TypeError):
            return f"HTTP {response.status_code}: {response.text[:120]}"

    return call


async def sample_running(client: httpx.AsyncClient, stop: anyio.Event, seen: list[int]) -> None:
    """Poll the server's count of the user's running executions about once a second."""
    while not stop.is_set():
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            response = await client.get("/api/tools/executions/active")
            seen.append(int(response.json()["count"]))
        with anyio.move_on_after(1.0):
            await stop.wait()


async def api_phase(api: Api, key: str, clients: int, seconds: float, warmup_s: float) -> Phase:
    """N clients executing the echo tool through the API."""
    procs = {"api(uvicorn)": api.pid, **{f"mcp-server({i})": c for i, c in enumerate(children(api.pid))}}
    async with api_clients(api, key, clients) as pools, api_clients(api, key, 1) as (probe,):
        await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), execute(pools), warmup_s, {})
        seen: list[int] = []
        stop = anyio.Event()
        api.reset_timings()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample_running, probe, stop, seen)
            phase = await hammer(Phase("API", clients), execute(pools), seconds, procs)
            stop.set()
    phase.notes.append(f"running executions seen by the server (getActiveExecutions, ~1/s): max {max(seen, default=0)}")
    timings = await api.read_timings()
    executes = timings.get("3 tool stack call (total)", (0, 0.0))[0]
    if executes:
        phase.notes.append(f"server wall time per stage (mean per occurrence; occurrences per execute), {executes} executes:")
        for stage, (count, total_s) in sorted(timings.items()):
            phase.notes.append(f"  {stage:<42} {total_s / count * 1000:9.2f} ms  x{count / executes:4.1f}")
    return phase


@contextlib.contextmanager
def relay_server(workdir: Path) -> Iterator[Api]:
    """bench/_http_relay.py on a free port: the HTTP layer alone, for comparison."""
    port = free_port()
    log = workdir / "relay.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(HERE / "_http_relay.py"), str(port)], stdout=out,
                                stderr=subprocess.STDOUT)
    api = Api(f"http://127.0.0.1:{port}", proc.pid, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"relay did not start:\n{log.read_text(errors='replace')[-3000:]}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if httpx.get(f"{api.url}/ready", timeout=2).json().get("ready"):
                    break
            time.sleep(0.1)
        yield api
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def relay_phase(relay: Api, clients: int, seconds: float, warmup_s: float) -> Phase:
    """N clients executing the echo tool through the bare relay (same route, body and client pools)."""
    procs = {"relay(uvicorn)": relay.pid, **{f"mcp-server({i})": c for i, c in enumerate(children(relay.pid))}}
    async with api_clients(relay, "none", clients) as pools:
        await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), execute(pools), warmup_s, {})
        return await hammer(Phase("relay", clients), execute(pools), seconds, procs)


async def direct_phase(clients: int, seconds: float, warmup_s: float) -> Phase:
    """N clients calling the echo tool over one shared MCP session to the same kind of server."""
    params = StdioServerParameters(command=sys.executable, args=SERVER_ARGS)
    already = set(children(os.getpid()))  # the API server is a child too
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        server = [pid for pid in children(os.getpid()) if pid not in already]
        procs = {f"mcp-server({i})": pid for i, pid in enumerate(server)}

        async def call(_: int) -> str | None:
            result = await session.call_tool(TOOL, {"text": "hello"})
            return "is_error: " + str(result.content)[:100] if result.is_error else None

        await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), call, warmup_s, {})
        return await hammer(Phase("direct", clients), call, seconds, procs)


# -- the rate-limit burst ---------------------------------------------------------------------------


async def burst(api: Api, key: str, q: int, background_key: str, background_clients: int) -> bool:
    """3xQ concurrent executes by a user allowed Q per minute, under background load; prints the verdict."""
    left = 60 - time.time() % 60
    if left < BURST_MARGIN_S:
        print(f"  waiting {left:.1f} s for the next clock minute (rate windows are clock minutes)")
        await anyio.sleep(left + 0.2)
    background = Phase("background", background_clients)
    async with api_clients(api, background_key, background_clients) as bg, api_clients(api, key, 3 * q) as pools:
        async with anyio.create_task_group() as tg:
            tg.start_soon(hammer, background, execute(bg), 3.0, {})
            await anyio.sleep(1.0)  # let the background load reach its stride
            t0 = time.time()
            responses: list[httpx.Response | BaseException | None] = [None] * (3 * q)

            async def one(i: int) -> None:
                try:
                    responses[i] = await pools[i // CONNECTIONS_PER_CLIENT].post("/api/tools/execute", json=BODY)
                except Exception as exc:  # noqa: BLE001 - reported below
                    responses[i] = exc

            async with anyio.create_task_group() as shots:
                for i in range(3 * q):
                    shots.start_soon(one, i)
            took = time.time() - t0
        history = (await pools[0].get("/api/tools/history", params={"limit": 1})).json()

    codes = collections.Counter(r.status_code if isinstance(r, httpx.Response) else type(r).__name__ for r in responses)
    ok = [r for r in responses if isinstance(r, httpx.Response) and r.status_code == 200]
    refused = [r for r in responses if isinstance(r, httpx.Response) and r.status_code == 429]
    headers_ok = all(
        r.headers.get("X-RateLimit-Limit") == str(q) and r.headers.get("X-RateLimit-Remaining") == "0"
        and r.headers.get("Retry-After") and r.headers.get("X-RateLimit-Reset") for r in refused
    ) and all(r.headers.get("X-RateLimit-Limit") == str(q) and r.headers.get("X-RateLimit-Remaining") for r in ok)
    stats = history.get("stats", {})
    store_ok = history.get("totalCount") == 3 * q and stats.get("success") == q and stats.get("failed") == 2 * q
    exact = len(ok) == q and len(refused) == 2 * q and headers_ok and store_ok
    straddled = int(t0 // 60) != int((t0 + took) // 60)
    print(f"  plan allows Q={q}/min; fired {3 * q} concurrent executes in {took:.2f} s "
          f"(minute second {t0 % 60:.1f}..{(t0 + took) % 60:.1f}) under {background_clients} background clients "
          f"({background.per_s:.0f} calls/s, {sum(background.errors.values())} errors)")
    print(f"  answers: {dict(sorted(codes.items(), key=str))}  -> 200: {len(ok)} (want {q}), 429: {len(refused)} (want {2 * q})")
    remaining = sorted(int(r.headers.get("X-RateLimit-Remaining", -1)) for r in ok)
    print(f"  X-RateLimit-Limit/Remaining/Reset + Retry-After on every 429, X-RateLimit on every 200: "
          f"{'yes' if headers_ok else 'NO'} (Remaining on the 200s: {len(set(remaining))} distinct values, "
          f"{remaining[0] if remaining else '-'}..{remaining[-1] if remaining else '-'})")
    print(f"  store's history for the user: total {history.get('totalCount')}, success {stats.get('success')}, "
          f"failed (denied) {stats.get('failed')}  -> {'agrees' if store_ok else 'DISAGREES'}")
    if straddled and not exact:
        print("  rate limit: INCONCLUSIVE (the burst straddled two clock minutes, so two windows counted; run again)")
    else:
        print(f"  rate limit: {'EXACT' if exact else 'NOT EXACT'}")
    return exact


# -- main -----------------------------------------------------------------------------------------


async def load(api: Api, relay: Api | None, keys: dict[str, str], args: argparse.Namespace, big: str, small: str) -> None:
    """Phase 1 for each client count, then phase 2."""
    results: dict[int, tuple[Phase, Phase, Phase | None]] = {}
    print(f"1. throughput: {args.seconds:g} s per phase (after a {args.warmup:g} s warm-up of <= {WARMUP_CLIENTS} clients), tool {TOOL} of "
          f"bench/bench_server.py over stdio; direct = N tasks sharing one ClientSession; relay = the same HTTP "
          f"route on a bare FastAPI app forwarding to one MCP session (no key, gate, limits, records or audit)")
    for n in args.clients:
        through_api = await api_phase(api, keys[big], n, args.seconds, args.warmup)
        through_api.print()
        through_relay = None
        if relay is not None:
            through_relay = await relay_phase(relay, n, args.seconds, args.warmup)
            through_relay.print()
        direct = await direct_phase(n, args.seconds, args.warmup)
        direct.print()
        results[n] = (through_api, direct, through_relay)
    if 100 in results:
        a, d, r = results[100]
        ratio = a.per_s / d.per_s if d.per_s else 0.0
        p50 = pct(a.latencies_s, .5) / pct(d.latencies_s, .5)
        print(f"  ratio API/direct throughput at N=100: {ratio:.2f} (target >= {TARGET_RATIO:.2f}) "
              f"{'OK' if ratio >= TARGET_RATIO else 'BELOW'}   (p50 latency API/direct: {p50:.1f}x)")
        if r is not None and d.per_s and r.per_s:
            print(f"  the HTTP layer alone at N=100: relay/direct {r.per_s / d.per_s:.2f}, API/relay {a.per_s / r.per_s:.2f}")
    if TARGET_CLIENTS in results:
        a = results[TARGET_CLIENTS][0]
        errors = sum(a.errors.values())
        print(f"  target: {TARGET_CLIENTS:,} concurrent executions with no error: {a.calls} calls, {errors} errors "
              f"-> {'OK' if errors == 0 and a.calls >= TARGET_CLIENTS else 'FAILED'}")
    else:
        print(f"  target: {TARGET_CLIENTS:,} concurrent executions: not measured (add {TARGET_CLIENTS} to --clients)")
    print("2. rate-limit exactness under load")
    await burst(api, keys[small], args.rate_q, keys[big], args.burst_background)


# -- the peer ------------------------------------------------------------------------------------------


def rpc(pools: list[httpx.AsyncClient], tool: str, session: bool) -> Call:
    """One JSON-RPC `tools/call` of `tool` through a gateway's `/rpc`; client i uses pool i // 10 and,
    with `session`, its own `Mcp-Session-Id`."""

    async def call(i: int) -> str | None:
        headers = {"Mcp-Session-Id": f"bench-client-{i}"} if session else None
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": {"text": "hello"}}}
        response = await pools[(i // CONNECTIONS_PER_CLIENT) % len(pools)].post("/rpc", json=body, headers=headers)
        if response.status_code != 200:
            return f"HTTP {response.status_code}: {response.text[:120]}"
        answer = response.json()
        if "error" in answer:
            return f"JSON-RPC error: {str(answer['error'])[:120]}"
        return "isError: " + str(answer["result"].get("content"))[:100] if answer["result"].get("isError") else None

    return call


@contextlib.asynccontextmanager
async def token_clients(url: str, headers: dict[str, str], clients: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """Like `api_clients`, for a server with other credentials."""
    async with contextlib.AsyncExitStack() as stack:
        pools = []
        for first in range(0, clients, CONNECTIONS_PER_CLIENT):
            size = min(CONNECTIONS_PER_CLIENT, clients - first)
            limits = httpx.Limits(max_connections=size, max_keepalive_connections=size)
            pools.append(await stack.enter_async_context(httpx.AsyncClient(
                base_url=url, headers=headers, limits=limits, timeout=httpx.Timeout(CLIENT_TIMEOUT_S))))
        yield pools


def row_growth(before: dict[str, int], after: dict[str, int], calls: int) -> str:
    """`table +rows/call, ...` for the tables that gained rows."""
    grown = {t: after[t] - before.get(t, 0) for t in after if after[t] > before.get(t, 0)}
    return ", ".join(f"{t} {n / calls:.2f}" for t, n in sorted(grown.items(), key=lambda kv: -kv[1])) or "none"


async def peer_rounds(api: Api, key: str, cf: Any, tool: str, args: argparse.Namespace, store_file: Path | None,
                      upstream_pid: int) -> None:
    """Alternate toolagent and ContextForge phases; print each, then the best round of each and the ratios."""
    import _contextforge

    clients = args.clients[0]
    kinds = ["toolagent", "cf", "cf+session"]
    phases: dict[str, list[Phase]] = {k: [] for k in kinds}
    records: dict[str, str] = {}
    for r in range(args.peer_rounds):
        for kind in kinds:
            if kind == "toolagent":
                procs = {"api(uvicorn)": api.pid, "mcp-server": upstream_pid}
                async with api_clients(api, key, clients) as pools:
                    await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), execute(pools), args.warmup, {})
                    before = _contextforge.table_rows(store_file) if store_file else {}
                    phase = await hammer(Phase(f"API#{r + 1}", clients), execute(pools), args.seconds, procs)
                if store_file:
                    records[kind] = row_growth(before, _contextforge.table_rows(store_file), phase.calls)
            else:
                procs = {"contextforge": cf.pid, **{f"cf-child({i})": c for i, c in enumerate(children(cf.pid))},
                         "mcp-server": upstream_pid}
                async with token_clients(cf.url, cf.headers, clients) as pools:
                    call = rpc(pools, tool, kind == "cf+session")
                    await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), call, args.warmup, {})
                    before = cf.row_counts()
                    phase = await hammer(Phase(f"{'CF+sid' if kind == 'cf+session' else 'CF'}#{r + 1}", clients),
                                         call, args.seconds, procs)
                records[kind] = row_growth(before, cf.row_counts(), phase.calls)
            phase.print()
            phases[kind].append(phase)
    best = {k: max(v, key=lambda p: p.per_s) for k, v in phases.items()}
    print(f"  best round of each at N={clients} (calls/s, p50 ms, server CPU ms/call):")
    for kind, phase in best.items():
        server = "api(uvicorn)" if kind == "toolagent" else "contextforge"
        cpu = sum(v for k, v in phase.cpu.items() if k == server or k.startswith("cf-child")) / max(phase.calls, 1) * 1000
        print(f"    {kind:<11} {phase.per_s:7.0f}  {pct(phase.latencies_s, .5) * 1000:8.1f}  {cpu:7.2f}")
    a = best["toolagent"]
    for kind in ("cf", "cf+session"):
        if best[kind].per_s:
            print(f"  ratio toolagent/{kind} throughput: {a.per_s / best[kind].per_s:.1f}x")
    print("  rows each database gained per call (tables updated in place, e.g. toolagent's totals and limit counters, "
          "do not show):")
    for kind, text in records.items():
        print(f"    {kind:<11} {text}")
    if not store_file:
        print("    (toolagent's rows are counted on its SQLite store only)")
    print("    toolagent writes its execution row and both audit rows (decision, outcome) before it answers; ContextForge "
          "at its defaults keeps per-call tool metrics in a memory buffer written every 60 s or 1,000 calls "
          "(METRICS_BUFFER_*), with its audit trail, security log and database logs off")


def run_peer(args: argparse.Namespace, engine_config: dict[str, Any], big: str) -> None:
    """`--peer contextforge`: install/start the peer, the shared upstream and the API; alternate phases."""
    import _contextforge

    try:
        venv = _contextforge.ensure_installed(args.peer_spec)
    except _contextforge.PeerUnavailable as exc:
        sys.exit(f"--peer contextforge: {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        db = args.db or f"sqlite+aiosqlite:///{work / 'api.db'}"
        keys = provision(db, [(big, "enterprise")])
        store_file = Path(db.split(":///", 1)[1]) if db.startswith("sqlite") else None
        try:
            with contextlib.ExitStack() as stack:
                upstream_port = free_port()
                upstream = stack.enter_context(_contextforge.http_bench_server(HERE / "bench_server.py", upstream_port, work))
                upstream_pid = next(pid for pid in children(os.getpid())
                                    if str(upstream_port) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"))
                cf = stack.enter_context(_contextforge.gateway(venv, work / "contextforge", free_port()))
                cf.register("bench", upstream)
                tool = cf.tool_name(TOOL)
                api = stack.enter_context(api_server(work, db, engine_config, None, upstream_url=upstream))
                print(f"peer: ContextForge {_version(venv)} at its defaults (SQLite, 1 process) and toolagent "
                      f"({db.split('://')[0]}), both relaying tool {TOOL} of one bench_server.py over streamable HTTP; "
                      f"{args.seconds:g} s per phase, {args.peer_rounds} rounds; cpus: {os.cpu_count()}")
                anyio.run(peer_rounds, api, keys[big], cf, tool, args, store_file, upstream_pid)
        except _contextforge.PeerUnavailable as exc:
            sys.exit(f"--peer contextforge: {exc}")


def _version(venv: Path) -> str:
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import importlib.metadata as m; print(m.version('mcp-contextforge-gateway'))"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "(unknown version)"


def main() -> None:
    """Parse the arguments, start the server, run the phases."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each measured phase (default 10)")
    parser.add_argument("--warmup", type=float, default=1.0, help="warm-up before each phase, seconds (default 1)")
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[100, 1000],
                        help="comma-separated concurrent client counts (default 100,1000)")
    parser.add_argument("--rate-q", type=int, default=50, help="calls per minute of the rate-limited plan (default 50)")
    parser.add_argument("--burst-background", type=int, default=100, help="clients keeping the API busy during the burst")
    parser.add_argument("--db", help="store URL, e.g. postgresql://... (default: a temporary SQLite file)")
    parser.add_argument("--profile", type=Path, help="run the server under cProfile and dump the stats to this file")
    parser.add_argument("--timings", action="store_true",
                        help="patch wall-clock timers around the server's stages (bench/_api_timing.py) and print them")
    parser.add_argument("--no-relay", action="store_true", help="skip the bare-relay comparison phase")
    parser.add_argument("--peer", choices=["contextforge"], help="compare with a peer gateway instead (see above)")
    parser.add_argument("--peer-rounds", type=int, default=2, help="alternating rounds in peer mode (default 2)")
    parser.add_argument("--peer-spec", default="mcp-contextforge-gateway",
                        help="what pip installs for the peer on first use (e.g. a pinned version)")
    args = parser.parse_args()

    suffix = secrets.token_hex(3)  # a --db store may already hold earlier runs' users
    big, small = f"load-{suffix}", f"limited-{suffix}"
    engine_config = {"plans": {
        "enterprise": {"rate_per_minute": 100_000_000, "monthly_budget": None},  # counted, never reached
        "starter": {"rate_per_minute": args.rate_q, "monthly_budget": None},
    }}
    if args.peer:
        if args.clients == [100, 1000]:
            args.clients = [100]
        run_peer(args, engine_config, big)
        return
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"sqlite+aiosqlite:///{Path(tmp) / 'api.db'}"
        keys = provision(db, [(big, "enterprise"), (small, "starter")])
        print(f"store: {db.split('://')[0]}; cpus: {os.cpu_count()}; users {big} (enterprise, unlimited) and "
              f"{small} (starter, {args.rate_q}/min)")
        with contextlib.ExitStack() as stack:
            api = stack.enter_context(api_server(Path(tmp), db, engine_config, args.profile, args.timings))
            relay = None if args.no_relay else stack.enter_context(relay_server(Path(tmp)))
            anyio.run(load, api, relay, keys, args, big, small)
            log = api.log
        tail = log.read_text(errors="replace").strip()
        if tail:
            print(f"server log (last lines):\n{tail[-2000:]}")
    if args.profile is not None:
        import pstats

        print(f"server profile (cProfile, {args.profile}), top 25 by own time:")
        pstats.Stats(str(args.profile)).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
