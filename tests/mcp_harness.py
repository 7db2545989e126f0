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

from conftest import NODE_BIN, REPO_ROOT
from toolagent.mcp.config import ServersConfig

PROBE = REPO_ROOT / "tests" / "servers" / "probe_server.py"


def probe_config(log: Path | None = None, **extra: Any) -> dict[str, Any]:
    """Config entry of the probe server over stdio."""
    env = {"PROBE_LOG": str(log)} if log else {}
    return {"command": sys.executable, "args": [str(PROBE)], "env": env, **extra}


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
    proc = subprocess.Popen([sys.executable, str(PROBE), "http", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


def processes_matching(pattern: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains `pattern`, other than this one."""
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
        if pattern in cmd and int(entry.name) != me and ") Z" not in stat:
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
