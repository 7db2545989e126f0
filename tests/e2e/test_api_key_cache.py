"""API keys are resolved from memory between changes, yet a revocation or a level change made by
another process (the CLI) is refused on the very next request, on SQLite and PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from api_harness import LiveServer, User, live_server, probe_servers, provision

USERS = [("boss", "admin", "enterprise"), ("leaver", "execute_basic", "enterprise")]


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[dict[str, User], LiveServer]]:
    users = provision(db_url, USERS)
    with live_server(tmp_path, probe_servers(), db=db_url) as server:
        yield users, server


def cli(db: str, *args: str) -> str:
    """Run the CLI in its own process against `db`; its stdout."""
    done = subprocess.run([sys.executable, "-m", "toolagent.cli", "--db", db, *args], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_key_revoked_by_another_process_is_refused_on_its_next_request(
        served: tuple[dict[str, User], LiveServer]) -> None:
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
        served: tuple[dict[str, User], LiveServer]) -> None:
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
