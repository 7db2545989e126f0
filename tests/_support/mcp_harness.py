"""Helpers for tests that cross real MCP transports: server configs, HTTP servers, process checks."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _support.repo import NODE_BIN, REPO_ROOT
from toolagent.mcp.config import ServersConfig

PROBE = REPO_ROOT / "tests" / "servers" / "probe_server.py"
STUCK = REPO_ROOT / "tests" / "servers" / "stuck_server.py"


def probe_config(log: Path | None = None, **extra: Any) -> dict[str, Any]:
    """Config entry of the probe server over stdio."""
    env = {"PROBE_LOG": str(log)} if log else {}
    return {"command": sys.executable, "args": [str(PROBE)], "env": env, **extra}


def stuck_config(log: Path | None = None, **extra: Any) -> dict[str, Any]:
    """Config entry of the stuck server (a call that blocks it, ignoring SIGTERM) over stdio."""
    return {**probe_config(log, **extra), "args": [str(STUCK)]}


def node_config(name: str, *args: str) -> dict[str, Any]:
    """Config entry of an npm-installed server."""
    return {"command": str(NODE_BIN / name), "args": list(args)}


def servers(**entries: dict[str, Any]) -> ServersConfig:
    """A config from keyword entries."""
    return ServersConfig.from_data({"mcpServers": entries})


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_probe(log: Path | None = None) -> Iterator[str]:
    """The probe server over streamable HTTP on 127.0.0.1; yields its URL."""
    port = free_port()
    env = {**os.environ, **({"PROBE_LOG": str(log)} if log else {})}
    proc = subprocess.Popen(
        [sys.executable, str(PROBE), "http", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            if proc.poll() is not None:
                raise RuntimeError("probe HTTP server exited at start-up")
            time.sleep(0.05)
        else:
            raise RuntimeError("probe HTTP server did not listen within 30 s")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


#: How a pytest-xdist worker process is started (execnet's bootstrap).
_XDIST_WORKER = "exec(eval(sys.stdin.readline()))"


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _parent(pid: int) -> int:
    try:
        # The command name in field 2 may hold spaces and parentheses: split after its last ')'.
        return int((Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _another_workers(pid: int, me: int) -> bool:
    """True when `pid` descends from another pytest-xdist worker than this one (its tests' servers
    are none of this test's business); an orphan, reparented to init, counts as this one's."""
    while pid > 1:
        if pid == me:
            return False
        if _XDIST_WORKER in _cmdline(pid):
            return True
        pid = _parent(pid)
    return False


def processes_matching(pattern: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `pattern`, other than this one and
    those started by another pytest worker running beside this one."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if pattern in cmd and int(entry.name) != me and ") Z" not in stat and not _another_workers(int(entry.name), me):
            found.append(int(entry.name))
    return found


def read_log(path: Path) -> list[dict[str, Any]]:
    """Events the probe server wrote."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


#: The page `served_page` serves (a fetch server and Chromium read it in the tests).
PAGE = "<html><head><title>Hello page</title></head><body><h1>Hello from the test</h1></body></html>"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def served_page(root: Path) -> Iterator[str]:
    """`PAGE` as `index.html`, served from `root` on 127.0.0.1; yields its URL."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "index.html").write_text(PAGE)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        thread.join(timeout=5)
