"""IBM's MCP ContextForge gateway as a peer in bench/api_load.py (`--peer contextforge`).

Installs PyPI `mcp-contextforge-gateway` into a virtualenv of its own under the bench's cache
(`$XDG_CACHE_HOME/toolagent-bench/contextforge`, else `~/.cache/...`; created on first use, never
committed), starts `mcpgateway` on 127.0.0.1 at its documented defaults, registers an MCP server
(streamable HTTP) as a gateway, and calls its tools through `POST /rpc` (JSON-RPC `tools/call`).

Settings changed from the defaults, each because the gateway refuses to work otherwise here:
- `JWT_SECRET_KEY`, `AUTH_ENCRYPTION_SECRET`: it refuses to start with the weak sample values, so
  random ones are made per run; the API token is signed with the first
  (`python -m mcpgateway.utils.create_jwt_token`, as its docs show);
- `SSRF_ALLOW_LOCALHOST=true`: its SSRF guard refuses upstreams on loopback, where the bench
  server listens;
- `RATE_LIMIT_{CRITICAL,HIGH,MEDIUM,LOW}_RPM=100000000`, `RATE_LIMIT_LOCKOUT_ENABLED=false`: its
  rate limiter (on by default in the 1.0.7.post20260921 build the bench installs) allows 500 calls a
  minute and locks the client out for 15 minutes after five refusals, so the load would measure
  refusals.
  The limiter stays on, raised as far as toolagent's bench user is.
Everything else (SQLite `./mcp.db` in its working directory, one process, logging at ERROR, no
Redis) is the default.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from _processes import stop

#: What pip installs (pin a version with --peer-spec).
DEFAULT_SPEC = "mcp-contextforge-gateway"
#: The gateway's start can take a minute the first time (it migrates its database).
START_TIMEOUT_S = 180.0


class PeerUnavailable(RuntimeError):
    """The peer could not be installed, started or set up; the message says which step and why."""


def cache_dir() -> Path:
    """The bench's cache folder."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolagent-bench"


def ensure_installed(spec: str = DEFAULT_SPEC) -> Path:
    """The peer's virtualenv, created and filled on first use; returns its folder.

    Raises:
        PeerUnavailable: venv creation or pip failed (with pip's last lines).
    """
    venv = cache_dir() / "contextforge"
    if (venv / "bin" / "mcpgateway").exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"  installing {spec} into {venv} (first use; a few minutes)", flush=True)
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--upgrade", "pip"],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec],
    ]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise PeerUnavailable(
                f"installing ContextForge failed at `{' '.join(step[-3:])}` (exit {done.returncode}):\n{tail}"
            )
    if not (venv / "bin" / "mcpgateway").exists():
        raise PeerUnavailable(f"{spec} installed but {venv}/bin/mcpgateway is missing: is it the gateway package?")
    return venv


@dataclass(frozen=True)
class Gateway:
    """A running ContextForge gateway."""

    url: str
    pid: int
    token: str
    workdir: Path
    log: Path

    @property
    def database(self) -> Path:
        """Its SQLite database (the default `sqlite:///./mcp.db`, in its working directory)."""
        return self.workdir / "mcp.db"

    def register(self, name: str, upstream_url: str) -> None:
        """Register a streamable-HTTP MCP server as a gateway.

        Raises:
            PeerUnavailable: the gateway refused it.
        """
        response = httpx.post(
            f"{self.url}/gateways",
            headers=self.headers,
            timeout=60,
            json={"name": name, "url": upstream_url, "transport": "STREAMABLEHTTP"},
        )
        if response.status_code >= 300:
            raise PeerUnavailable(
                f"ContextForge refused to register {upstream_url}: HTTP {response.status_code} "
                f"{response.text[:300]} (log: {self.log})"
            )

    def tool_name(self, original: str) -> str:
        """The gateway's name for an upstream tool (`<gateway>-<tool>`, slugged).

        Raises:
            PeerUnavailable: no such tool is listed.
        """
        response = httpx.get(f"{self.url}/tools", headers=self.headers, timeout=60)
        listed = response.json() if response.status_code == 200 else []
        items = listed if isinstance(listed, list) else listed.get("items", [])
        for tool in items:
            if tool.get("originalName") == original:
                return str(tool["name"])
        raise PeerUnavailable(
            f"ContextForge lists no tool named {original!r} (HTTP {response.status_code}: {response.text[:300]})"
        )

    @property
    def headers(self) -> dict[str, str]:
        """The API token."""
        return {"Authorization": f"Bearer {self.token}"}

    def row_counts(self) -> dict[str, int]:
        """Rows per table of its database (to see what it keeps per call)."""
        return table_rows(self.database)


def table_rows(path: Path) -> dict[str, int]:
    """Rows per table of a SQLite file, read-only."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}


@contextlib.contextmanager
def gateway(venv: Path, workdir: Path, port: int) -> Iterator[Gateway]:
    """`mcpgateway` on 127.0.0.1:`port`, working in `workdir`; stopped (`_processes.stop`) afterwards.

    Raises:
        PeerUnavailable: it exited or did not answer /health in time, or no token could be made.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    jwt_secret = secrets.token_urlsafe(48)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TOOLAGENT_", "PYTHONPATH"))}
    env.update(JWT_SECRET_KEY=jwt_secret, AUTH_ENCRYPTION_SECRET=secrets.token_urlsafe(48), SSRF_ALLOW_LOCALHOST="true")
    # Its rate limiter stays on (every call still passes through it), raised as far as toolagent's
    # bench user is (100,000,000 calls a minute): at its default of 500 a minute, with a lockout
    # after five refusals, it answers the load 429 and locks the client out for 15 minutes, which
    # measures the limiter, not the gateway.
    env.update(
        {f"RATE_LIMIT_{tier}_RPM": "100000000" for tier in ("CRITICAL", "HIGH", "MEDIUM", "LOW")},
        RATE_LIMIT_LOCKOUT_ENABLED="false",
    )
    log = workdir / "contextforge.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(venv / "bin" / "mcpgateway"), "--host", "127.0.0.1", "--port", str(port)],
            cwd=workdir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise PeerUnavailable(
                    f"ContextForge exited at start (code {proc.returncode}):\n{log.read_text(errors='replace')[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise PeerUnavailable(f"ContextForge did not answer /health within {START_TIMEOUT_S:g} s (log: {log})")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.25)
        made = subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "mcpgateway.utils.create_jwt_token",
                "--username",
                "admin@example.com",
                "--exp",
                "120",
                "--secret",
                jwt_secret,
            ],
            capture_output=True,
            text=True,
            cwd=workdir,
            env=env,
        )
        token = made.stdout.strip().splitlines()[-1] if made.returncode == 0 and made.stdout.strip() else ""
        if not token:
            raise PeerUnavailable(f"could not make a ContextForge token: {made.stderr.strip()[-500:]}")
        yield Gateway(url, proc.pid, token, workdir, log)
    finally:
        stop(proc)


@contextlib.contextmanager
def http_bench_server(script: Path, port: int, workdir: Path) -> Iterator[str]:
    """bench_server.py over streamable HTTP on `port`; yields its MCP URL."""
    log = workdir / "bench-http.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(script), "http", str(port), "1"], stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise PeerUnavailable(
                    f"the HTTP bench server did not start:\n{log.read_text(errors='replace')[-2000:]}"
                )
            with contextlib.suppress(OSError), socket_to(port):
                break
            time.sleep(0.1)
        yield url
    finally:
        stop(proc)


@contextlib.contextmanager
def socket_to(port: int) -> Iterator[None]:
    """A TCP connection to 127.0.0.1:`port` (raises OSError while nothing listens)."""
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=1):
        yield
