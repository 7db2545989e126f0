"""The servers bench/api_load.py measures, each in a subprocess on a free port: the API under uvicorn
(with bench_server.py as its one MCP server) and the bare HTTP relay, bench/_http_relay.py; the
users and keys they are called with; and the execute call itself."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from _load import CONNECTIONS_PER_CLIENT, Call, http_pools
from _processes import free_port, stop

from toolagent.engine.config import ENGINE_CONFIG_ENV
from toolagent.engine.principals import Principals
from toolagent.store import open_store

HERE = Path(__file__).resolve().parent
SERVER_ARGS = [str(HERE / "bench_server.py"), "stdio", "0", "1"]  # tools echo_0 and sleep_0
TOOL = "echo_0"
BODY = {"name": f"bench/{TOOL}", "arguments": {"text": "hello"}}

#: Runs the app under uvicorn: argv = store URL, servers file, port; cProfile when BENCH_PROFILE names a file.
LAUNCH = """
import cProfile, os, signal, sys
import uvicorn
from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

db, servers, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = create_app(db=db, servers=ServersConfig.load(servers))
app.state.freeze_heap = True  # as `toolagent serve` sets (toolagent._heap)
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
def api_server(
    workdir: Path,
    db: str,
    engine_config: dict[str, Any],
    profile: Path | None,
    timings: bool = False,
    upstream_url: str | None = None,
) -> Iterator[Api]:
    """uvicorn with the app and the bench server (over stdio, or the one at `upstream_url` over
    streamable HTTP) on a free port; stopped (SIGTERM) afterwards."""
    servers = workdir / "mcp.json"
    entry = (
        {"url": upstream_url, "risk": "safe"}
        if upstream_url
        else {"command": sys.executable, "args": SERVER_ARGS, "risk": "safe"}
    )
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
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, db, str(servers), str(port)], env=env, stdout=out, stderr=subprocess.STDOUT
        )
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
        stop(proc)


@contextlib.asynccontextmanager
async def api_clients(api: Api, key: str, clients: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`http_pools` to `api`, sending `key` as the bearer token."""
    async with http_pools(api.url, {"Authorization": f"Bearer {key}"}, clients) as pools:
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


@contextlib.contextmanager
def relay_server(workdir: Path) -> Iterator[Api]:
    """bench/_http_relay.py on a free port: the HTTP layer alone, for comparison."""
    port = free_port()
    log = workdir / "relay.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "_http_relay.py"), str(port)], stdout=out, stderr=subprocess.STDOUT
        )
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
        stop(proc)
