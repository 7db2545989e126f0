"""Peer mode of bench/api_load.py (`--peer contextforge`): toolagent's API and IBM's MCP ContextForge
gateway relaying the same upstream tool, in alternating rounds with the same clients, and the rows
each one's database gains per call. bench/_contextforge.py installs, starts and drives the gateway.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _contextforge
import anyio
import httpx
from _api_server import HERE, TOOL, Api, api_clients, api_server, execute, provision
from _load import CONNECTIONS_PER_CLIENT, WARMUP_CLIENTS, Call, Phase, hammer, http_pools, pct
from _processes import children, free_port


def rpc(pools: list[httpx.AsyncClient], tool: str, session: bool) -> Call:
    """One JSON-RPC `tools/call` of `tool` through a gateway's `/rpc`; client i uses pool i // 10 and,
    with `session`, its own `Mcp-Session-Id`."""

    async def call(i: int) -> str | None:
        headers = {"Mcp-Session-Id": f"bench-client-{i}"} if session else None
        body = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {"text": "hello"}},
        }
        response = await pools[(i // CONNECTIONS_PER_CLIENT) % len(pools)].post("/rpc", json=body, headers=headers)
        if response.status_code != 200:
            return f"HTTP {response.status_code}: {response.text[:120]}"
        answer = response.json()
        if "error" in answer:
            return f"JSON-RPC error: {str(answer['error'])[:120]}"
        return "isError: " + str(answer["result"].get("content"))[:100] if answer["result"].get("isError") else None

    return call


def row_growth(before: dict[str, int], after: dict[str, int], calls: int) -> str:
    """`table +rows/call, ...` for the tables that gained rows."""
    grown = {t: after[t] - before.get(t, 0) for t in after if after[t] > before.get(t, 0)}
    return ", ".join(f"{t} {n / calls:.2f}" for t, n in sorted(grown.items(), key=lambda kv: -kv[1])) or "none"


async def peer_rounds(
    api: Api, key: str, cf: Any, tool: str, args: argparse.Namespace, store_file: Path | None, upstream_pid: int
) -> None:
    """Alternate toolagent and ContextForge phases; print each, then the best round of each and the ratios."""
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
                procs = {
                    "contextforge": cf.pid,
                    **{f"cf-child({i})": c for i, c in enumerate(children(cf.pid))},
                    "mcp-server": upstream_pid,
                }
                async with http_pools(cf.url, cf.headers, clients) as pools:
                    call = rpc(pools, tool, kind == "cf+session")
                    await hammer(Phase("warmup", min(clients, WARMUP_CLIENTS)), call, args.warmup, {})
                    before = cf.row_counts()
                    phase = await hammer(
                        Phase(f"{'CF+sid' if kind == 'cf+session' else 'CF'}#{r + 1}", clients),
                        call,
                        args.seconds,
                        procs,
                    )
                records[kind] = row_growth(before, cf.row_counts(), phase.calls)
            phase.print()
            phases[kind].append(phase)
    best = {k: max(v, key=lambda p: p.per_s) for k, v in phases.items()}
    print(f"  best round of each at N={clients} (calls/s, p50 ms, server CPU ms/call):")
    for kind, phase in best.items():
        server = "api(uvicorn)" if kind == "toolagent" else "contextforge"
        cpu = (
            sum(v for k, v in phase.cpu.items() if k == server or k.startswith("cf-child")) / max(phase.calls, 1) * 1000
        )
        print(f"    {kind:<11} {phase.per_s:7.0f}  {pct(phase.latencies_s, 0.5) * 1000:8.1f}  {cpu:7.2f}")
    a = best["toolagent"]
    for kind in ("cf", "cf+session"):
        if best[kind].per_s:
            print(f"  ratio toolagent/{kind} throughput: {a.per_s / best[kind].per_s:.1f}x")
    print(
        "  rows each database gained per call (tables updated in place, e.g. toolagent's totals and limit counters, "
        "do not show):"
    )
    for kind, text in records.items():
        print(f"    {kind:<11} {text}")
    if not store_file:
        print("    (toolagent's rows are counted on its SQLite store only)")
    print(
        "    toolagent writes its execution row and both audit rows (decision, outcome) before it answers; ContextForge "
        "at its defaults keeps per-call tool metrics in a memory buffer written every 60 s or 1,000 calls "
        "(METRICS_BUFFER_*), with its audit trail, security log and database logs off"
    )


def run_peer(args: argparse.Namespace, engine_config: dict[str, Any], big: str) -> None:
    """`--peer contextforge`: install/start the peer, the shared upstream and the API; alternate phases."""
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
                upstream = stack.enter_context(
                    _contextforge.http_bench_server(HERE / "bench_server.py", upstream_port, work)
                )
                upstream_pid = next(
                    pid
                    for pid in children(os.getpid())
                    if str(upstream_port) in Path(f"/proc/{pid}/cmdline").read_text(errors="replace")
                )
                cf = stack.enter_context(_contextforge.gateway(venv, work / "contextforge", free_port()))
                cf.register("bench", upstream)
                tool = cf.tool_name(TOOL)
                api = stack.enter_context(api_server(work, db, engine_config, None, upstream_url=upstream))
                print(
                    f"peer: ContextForge {_version(venv)} at its defaults but for its rate limits (raised as "
                    f"toolagent's are; SQLite, 1 process) and toolagent "
                    f"({db.split('://')[0]}), both relaying tool {TOOL} of one bench_server.py over streamable HTTP; "
                    f"{args.seconds:g} s per phase, {args.peer_rounds} rounds; cpus: {os.cpu_count()}"
                )
                anyio.run(peer_rounds, api, keys[big], cf, tool, args, store_file, upstream_pid)
        except _contextforge.PeerUnavailable as exc:
            sys.exit(f"--peer contextforge: {exc}")


def _version(venv: Path) -> str:
    done = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('mcp-contextforge-gateway'))",
        ],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "(unknown version)"
