"""`/docs` works with no internet: a live `toolagent serve` serves Swagger UI's page and every asset
it references, and headless Chromium, with every host but 127.0.0.1 unresolvable, renders the
operations."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.timeout(240)
TOOLAGENT = Path(sys.executable).parent / "toolagent"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A live API on 127.0.0.1 with no MCP servers (the docs need none)."""
    root = tmp_path_factory.mktemp("docs")
    (root / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLAGENT_")}
    proc = subprocess.Popen(
        [
            str(TOOLAGENT),
            "--db",
            str(root / "s.db"),
            "--servers",
            str(root / "mcp.json"),
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "server did not answer /health within 60 s"
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_every_asset_docs_references_is_served_by_the_app(server: str) -> None:
    page = httpx.get(f"{server}/docs", timeout=10)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    html = page.text
    assert not re.search(r"https?://", html), "the docs page references another host"
    assets = set(re.findall(r'(?:src|href)="([^"]+)"', html)) | set(re.findall(r"url: '([^']+)'", html))
    assert {"/docs/static/swagger-ui-bundle.js", "/docs/static/swagger-ui.css", "/openapi.json"} <= assets
    for url in assets:
        assert url.startswith("/"), url
        answer = httpx.get(f"{server}{url}", timeout=10)
        assert answer.status_code == 200 and answer.content, url
    assert httpx.get(f"{server}/redoc", timeout=10).status_code == 404  # it would load from a CDN


def test_the_root_points_to_the_docs(server: str) -> None:
    browser = httpx.get(f"{server}/", headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}, timeout=10)
    assert browser.status_code == 307 and browser.headers["location"] == "/docs"
    index = httpx.get(f"{server}/", headers={"Accept": "application/json"}, timeout=10)
    assert index.status_code == 200, index.text
    body = index.json()
    assert body["name"] == "toolagent" and body["version"] == httpx.get(f"{server}/health").json()["version"]
    assert {k: body[k] for k in ("docs", "openapi", "health", "ready")} == {
        "docs": "/docs",
        "openapi": "/openapi.json",
        "health": "/health",
        "ready": "/ready",
    }
    for link in ("docs", "openapi", "health"):
        assert httpx.get(f"{server}{body[link]}", timeout=10).status_code == 200, link
    assert httpx.get(f"{server}{body['ready']}", timeout=10).status_code == 503  # no servers configured here
    assert httpx.get(f"{server}/", timeout=10).status_code == 200  # no Accept at all: the index


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (scripts/test installs it when run as root)")
def test_chromium_renders_the_operations_offline(server: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            f"--user-data-dir={tmp_path / 'profile'}",
            # No internet: every host but the server's is unresolvable.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--virtual-time-budget=15000",
            "--dump-dom",
            f"{server}/docs",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'class="swagger-ui' in dom, dom[:2000]
    assert "opblock" in dom and "/api/tools/execute" in dom and "/api/agents/{org}/{slug}/build" in dom, dom[:2000]
