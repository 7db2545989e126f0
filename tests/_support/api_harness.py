"""Helpers for tests over a live HTTP API: uvicorn in a subprocess, users and API keys in its store."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from _support.mcp_harness import free_port, probe_config
from toolagent.store import open_store

#: Risk and category of the probe server's tools, so every cell of the permission matrix is reachable.
PROBE_RISK = {
    "echo": "safe",
    "make-number": "safe",
    "double": "safe",
    "pid": "safe",
    "sleep": "safe",
    "fail": "safe",
    "add": "moderate",
    "query": "dangerous",
    "crash": "dangerous",
    "add-tool": "dangerous",
}
PROBE_CATEGORY = {"echo": "memory", "make-number": "memory", "double": "memory"}

#: Runs the app under uvicorn: argv = store URL, servers file, port.
LAUNCH = """
import sys
import uvicorn
from toolagent.api.app import create_app
from toolagent.mcp.config import ServersConfig

db, servers, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
uvicorn.run(create_app(db=db, servers=ServersConfig.load(servers)), host="127.0.0.1", port=port,
            log_level="warning", timeout_graceful_shutdown=5)
"""


def probe_servers(log: Path | None = None) -> dict[str, Any]:
    """The `mcpServers` config of the probe server with per-tool risk and category."""
    return {"probe": probe_config(log, risk=PROBE_RISK, category=PROBE_CATEGORY)}


@dataclass(frozen=True)
class User:
    """A user of the live server and its API key."""

    name: str
    level: str
    key: str
    key_id: str

    @property
    def auth(self) -> dict[str, str]:
        """The Authorization header."""
        return {"Authorization": f"Bearer {self.key}"}


def provision(
    db: str, users: Sequence[tuple[str, str, str]], *, scopes: dict[str, list[str]] | None = None
) -> dict[str, User]:
    """Create `(name, level, plan)` users with one API key each (optionally scoped) in the store at `db`."""
    from toolagent.engine.principals import Principals

    made: dict[str, User] = {}

    async def body() -> None:
        async with open_store(db) as store:
            principals = Principals(store.db)
            for name, level, plan in users:
                await principals.add_user(name, level=level, plan=plan)
                key, raw = await principals.create_key(name, scopes=(scopes or {}).get(name, ()))
                made[name] = User(name, level, raw, key.id)

    anyio.run(body)
    return made


def revoke(db: str, key_id: str) -> None:
    """Revoke an API key in the store at `db`."""
    from toolagent.engine.principals import Principals

    async def body() -> None:
        async with open_store(db) as store:
            await Principals(store.db).revoke_key(key_id)

    anyio.run(body)


@dataclass
class LiveServer:
    """A running API server."""

    url: str
    db: str
    proc: subprocess.Popen[bytes]
    log: Path

    def client(self, user: User | None = None, **kwargs: Any) -> httpx.Client:
        """An HTTP client for the server, authenticated as `user` when given."""
        headers = dict(kwargs.pop("headers", {}))
        if user is not None:
            headers.update(user.auth)
        return httpx.Client(base_url=self.url, headers=headers, timeout=kwargs.pop("timeout", 30), **kwargs)

    def server_log(self) -> str:
        """What the server printed (for failure messages)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@contextlib.contextmanager
def live_server(
    workdir: Path,
    servers: dict[str, Any],
    *,
    engine_config: dict[str, Any] | None = None,
    db: str | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[LiveServer]:
    """Start uvicorn with the app on a free port of 127.0.0.1 and stop it afterwards.

    Args:
        workdir: Where the servers file, engine config, store and log go.
        servers: The `mcpServers` entries.
        engine_config: The engine config (plans, limits), written to a file the server reads.
        db: Store URL (default: a SQLite file in `workdir`).
        env: Extra environment variables for the server.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    db = db or f"sqlite+aiosqlite:///{workdir / 'api.db'}"
    servers_file = workdir / "mcp.json"
    servers_file.write_text(json.dumps({"mcpServers": servers}))
    environ = {**os.environ, **(env or {})}
    environ.pop("TOOLAGENT_ENGINE_CONFIG", None)
    if engine_config is not None:
        config_file = workdir / "engine.json"
        config_file.write_text(json.dumps(engine_config))
        environ["TOOLAGENT_ENGINE_CONFIG"] = str(config_file)
    port = free_port()
    log = workdir / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", LAUNCH, db, str(servers_file), str(port)],
            env=environ,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(f"http://127.0.0.1:{port}", db, proc, log)
    try:
        _wait_ready(server)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait_ready(server: LiveServer, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"API server exited at start-up:\n{server.server_log()}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/ready", timeout=2).status_code == 200:
                return
        time.sleep(0.05)
    raise RuntimeError(f"API server not ready within {timeout_s:g} s:\n{server.server_log()}")


def agent_body(definition: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A PUT /api/agents/{org}/{slug} body (the agents table's record) holding `definition` as JSON text."""
    name = definition.get("metadata", {}).get("name", "agent")
    return {
        "display_name": name,
        "agent_type": "tool",
        "mode_profile": "tool_full",
        "status": "active",
        "yaml": json.dumps(definition),
        **fields,
    }


def read_events(
    client: httpx.Client, run_id: str, *, on_event: Any = None, timeout_s: float = 30
) -> list[dict[str, Any]]:
    """Read `/api/runs/{run_id}/events` until the server ends the stream; the parsed `data` of each
    event, in order. `on_event(data)` is called as each one arrives (e.g. to cancel mid-run)."""
    return [data for _, data in read_sse(client, run_id, on_event=on_event, timeout_s=timeout_s)]


def read_sse(
    client: httpx.Client,
    run_id: str,
    *,
    last_event_id: str | None = None,
    on_event: Any = None,
    timeout_s: float = 30,
) -> list[tuple[str | None, dict[str, Any]]]:
    """`read_events` with each event's `id`, resuming after `last_event_id` when given (sent as
    `Last-Event-ID`, as a browser does on reconnecting)."""
    events: list[tuple[str | None, dict[str, Any]]] = []
    kind, event_id, data = None, None, []
    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers, timeout=timeout_s) as response:
        if response.status_code != 200:
            response.read()
            raise AssertionError(f"events of {run_id}: {response.status_code} {response.text}")
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith(":"):
                continue
            if line.startswith("id:"):
                event_id = line.partition(":")[2].strip()
            elif line.startswith("event:"):
                kind = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data.append(line.partition(":")[2].strip())
            elif not line and data:
                event = json.loads("\n".join(data))
                assert event["type"] == kind, (kind, event)
                events.append((event_id, event))
                kind, event_id, data = None, None, []
                if on_event is not None:
                    on_event(event)
    return events


# -- fixtures shared by the live-API test modules ---------------------------------------------------
# A module imports these and defines `users_and_server` (its users and a running server, module-scoped).


@pytest.fixture(scope="module")
def server(users_and_server: tuple[dict[str, User], LiveServer]) -> LiveServer:
    """The module's running server."""
    return users_and_server[1]


@pytest.fixture(scope="module")
def users(users_and_server: tuple[dict[str, User], LiveServer]) -> dict[str, User]:
    """The module's users by name."""
    return users_and_server[0]


@pytest.fixture
def as_user(server: LiveServer, users: dict[str, User]) -> Iterator[dict[str, httpx.Client]]:
    """An HTTP client per user, with that user's key."""
    clients = {name: server.client(user) for name, user in users.items()}
    try:
        yield clients
    finally:
        for c in clients.values():
            c.close()
