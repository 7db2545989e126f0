"""API keys are resolved from memory between changes, yet a revocation or a level change made by
another process (the CLI) is refused on the very next request, on SQLite and PostgreSQL, by one
server process or by every worker of `serve --workers`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.api_harness import LiveServer, User, live_server, probe_servers, provision
from _support.mcp_harness import free_port

USERS = [("boss", "admin", "enterprise"), ("leaver", "execute_basic", "enterprise")]


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[dict[str, User], LiveServer]]:
    users = provision(db_url, USERS)
    with live_server(tmp_path, probe_servers(), db=db_url) as server:
        yield users, server


def cli(db: str, *args: str) -> str:
    """Run the CLI in its own process against `db`; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "toolagent.cli", "--db", db, *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_key_revoked_by_another_process_is_refused_on_its_next_request(
    served: tuple[dict[str, User], LiveServer],
) -> None:
    users, server = served
    leaver = users["leaver"]
    with httpx.Client(base_url=server.url, headers=leaver.auth, timeout=30) as client:
        for _ in range(3):  # resolved once, then from memory
            assert client.get("/api/tools/history").status_code == 200
        assert client.post("/trpc/tools.getActiveExecutions").status_code == 405  # a query: the key was accepted
        cli(server.db, "keys", "revoke", leaver.key_id)
        refused = client.get("/api/tools/history")
        assert refused.status_code == 401 and "was revoked" in refused.json()["error"]["message"]
        executed = client.post("/api/tools/execute", json={"name": "probe/echo", "arguments": {"text": "x"}})
        assert executed.status_code == 401
        trpc = client.get("/trpc/tools.getActiveExecutions")
        assert trpc.status_code == 401 and trpc.json()["error"]["data"]["code"] == "UNAUTHORIZED"


def test_a_level_lowered_by_another_process_applies_on_the_next_request(
    served: tuple[dict[str, User], LiveServer],
) -> None:
    users, server = served
    boss = users["boss"]
    with httpx.Client(base_url=server.url, headers=boss.auth, timeout=30) as client:
        for _ in range(2):
            assert client.get("/api/tools/history", params={"allUsers": "true"}).status_code == 200
        cli(server.db, "users", "set-level", "boss", "execute_basic")
        lowered = client.get("/api/tools/history", params={"allUsers": "true"})
        assert lowered.status_code == 403, lowered.text
        # Raised again: the next request has it back.
        cli(server.db, "users", "set-level", "boss", "admin")
        assert client.get("/api/tools/history", params={"allUsers": "true"}).status_code == 200


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def test_serve_with_workers_shares_one_view_of_keys(db_url: str, tmp_path: Path) -> None:
    """`serve --workers 2`: two processes answer on one port, and a revocation reaches both at once."""
    users = provision(db_url, USERS)
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": probe_servers()}))
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "toolagent.cli",
                "--db",
                db_url,
                "--servers",
                str(servers),
                "serve",
                "--port",
                str(port),
                "--workers",
                "2",
                "--log-level",
                "warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while len(_children(proc.pid)) < 2 or not _ready(url):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        leaver = users["leaver"]
        # A fresh connection each time, so the kernel hands requests to either worker.
        answers = [
            httpx.get(f"{url}/api/tools/history", headers=leaver.auth, timeout=30).status_code for _ in range(12)
        ]
        assert answers == [200] * 12
        cli(db_url, "keys", "revoke", leaver.key_id)
        answers = [
            httpx.get(f"{url}/api/tools/history", headers=leaver.auth, timeout=30).status_code for _ in range(12)
        ]
        assert answers == [401] * 12
        executed = httpx.post(
            f"{url}/api/tools/execute",
            headers=users["boss"].auth,
            timeout=30,
            json={"name": "probe/echo", "arguments": {"text": "hi"}},
        )
        assert executed.status_code == 200, executed.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
