"""The shipped Supabase server exits once its stdin closes, even with a call still running.

The parent (standing in for a CLI build) starts the server over a pipe, runs a statement that
takes minutes (a cross join of the demo tables, with a long statement timeout) and is killed with
SIGKILL. The statement runs in a worker thread the SDK cannot interrupt, so without watching
stdin the server would live until the statement ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

PARENT = r"""
import json, subprocess, sys, time
env = dict(__import__("os").environ)
server = subprocess.Popen([sys.executable, "-m", "toolagent.servers.supabase"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
def send(msg):
    server.stdin.write((json.dumps(msg) + "\n").encode()); server.stdin.flush()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
      "capabilities": {}, "clientInfo": {"name": "parent", "version": "1"}}})
server.stdout.readline()
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "execute-sql", "arguments": {
      "sql": "SELECT count(*) AS n FROM users a, users b, users c, users d, agent_conversations e LIMIT 1"}}})
print(server.pid, flush=True)
time.sleep(600)
"""


def test_server_exits_when_its_parent_is_killed_mid_call(tmp_path: Path) -> None:
    env = {**os.environ, "SUPABASE_STATEMENT_TIMEOUT_MS": "600000", "SUPABASE_DEMO_DB": str(tmp_path / "demo.db")}
    parent = subprocess.Popen([sys.executable, "-c", PARENT], env=env, stdout=subprocess.PIPE, text=True)
    server_pid = 0
    try:
        assert parent.stdout is not None
        server_pid = int(parent.stdout.readline())
        _wait_busy(server_pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(server_pid), "the server outlived its killed parent by 10 s"
    finally:
        if parent.poll() is None:
            parent.kill()
        if server_pid and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)


def _wait_busy(pid: int) -> None:
    # The statement is running once the server has burnt a second of CPU time.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") > 1.0 + _startup_cpu(pid):
            return
        time.sleep(0.1)
    raise AssertionError("the statement did not start within 60 s")


_STARTUP: dict[int, float] = {}


def _startup_cpu(pid: int) -> float:
    # CPU the server spent before the call (imports, the demo database), measured once.
    if pid not in _STARTUP:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        _STARTUP[pid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return _STARTUP[pid]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return ") Z" not in stat
