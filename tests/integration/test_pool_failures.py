"""How the pool reports and recovers from server failures, over real transports.

A streamable-HTTP server restarted on the same port between two calls (the probe server on the
Python SDK, server-everything on the TypeScript SDK), Playwright MCP refusing a Host header with
403, a port nobody listens on, a stdio server that never answers, a Node server whose module is
missing.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _support.mcp_harness import PROBE, free_port, servers
from _support.repo import NODE_BIN

from toolagent.errors import ServerUnavailable, UpstreamError
from toolagent.mcp.pool import ServerPool

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _wait_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited at start-up")
        time.sleep(0.05)
    raise RuntimeError(f"server did not listen on port {port} within 30 s")


@contextlib.contextmanager
def _listening(cmd: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        cmd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_listening(proc, port)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _probe_http(port: int) -> list[str]:
    return [sys.executable, str(PROBE), "http", str(port)]


def _everything_http(port: int) -> tuple[list[str], dict[str, str]]:
    return [str(NODE_BIN / "mcp-server-everything"), "streamableHttp"], {"PORT": str(port)}


async def test_python_http_server_restarted_while_idle_is_reinitialized() -> None:
    port = free_port()
    config = servers(remote={"url": f"http://127.0.0.1:{port}/mcp"})
    async with ServerPool(config) as pool:
        with _listening(_probe_http(port), port):
            spec = await pool.tool_spec("remote/echo")
            first = await pool.call(spec, {"text": "before"})
        with _listening(_probe_http(port), port):
            with anyio.fail_after(30):
                second = await pool.call(spec, {"text": "after"})
    assert (first.structured or {})["text"] == "before" and (second.structured or {})["text"] == "after"
    assert pool.connects == 2


@pytest.mark.usefixtures("node_bin")
async def test_typescript_http_server_restarted_while_idle_is_reinitialized() -> None:
    port = free_port()
    cmd, env = _everything_http(port)
    config = servers(everything={"url": f"http://127.0.0.1:{port}/mcp"})
    async with ServerPool(config) as pool:
        with _listening(cmd, port, env):
            spec = await pool.tool_spec("everything/echo")
            first = await pool.call(spec, {"message": "before"})
        with _listening(cmd, port, env):
            with anyio.fail_after(30):
                second = await pool.call(spec, {"message": "after"})
    assert first.text == "Echo: before" and second.text == "Echo: after"
    assert pool.connects == 2


@pytest.mark.usefixtures("node_bin")
async def test_403_names_url_status_and_body() -> None:
    # Playwright MCP accepts only the Host it listens as (localhost:PORT); 127.0.0.1 gets 403.
    port = free_port()
    cmd = [
        str(NODE_BIN / "playwright-mcp"),
        "--port",
        str(port),
        "--headless",
        "--isolated",
        "--executable-path",
        "/usr/bin/chromium",
    ]
    url = f"http://127.0.0.1:{port}/mcp"
    async with ServerPool(servers(browser_http={"url": url})) as pool:
        with _listening(cmd, port):
            with pytest.raises(ServerUnavailable) as caught:
                await pool.list_tools("browser_http")
    message = caught.value.message
    assert f"HTTP 403 from {url}" in message and "Access is only allowed at localhost" in message, message


async def test_server_not_listening_names_its_url() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    async with ServerPool(servers(remote={"url": url})) as pool:
        with pytest.raises(ServerUnavailable, match=f"remote \\({url}: "):
            await pool.list_tools("remote")


async def test_a_server_that_never_answers_is_waited_for_once(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    hang = f"open({str(starts)!r}, 'a').write('start\\n'); import time; time.sleep(120)"
    config = servers(slow={"command": sys.executable, "args": ["-c", hang], "connect_timeout_s": 1.5})
    announced: list[tuple[str, float]] = []
    async with ServerPool(config, on_starting=lambda name, limit: announced.append((name, limit))) as pool:
        assert pool.connect_timeout_for("slow") == 1.5
        with pytest.raises(ServerUnavailable, match="no answer within 1.5 s"):
            await pool.list_tools("slow")
        with pytest.raises(ServerUnavailable, match="no answer within 1.5 s"):
            await pool.tool_spec("slow/anything")
    assert announced == [("slow", 1.5)]
    assert starts.read_text().splitlines() == ["start"]


async def test_connect_timeout_default_comes_from_the_file() -> None:
    config = servers(a={"command": "x"}, b={"command": "x", "connect_timeout_s": 5})
    config = config.model_copy(update={"connect_timeout_s": 7.0})
    async with ServerPool(config) as pool:
        assert (pool.connect_timeout_for("a"), pool.connect_timeout_for("b")) == (7.0, 5)


async def test_node_server_missing_module_keeps_the_reason(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-server.js"
    async with ServerPool(servers(broken={"command": "node", "args": [str(missing)]})) as pool:
        with pytest.raises(ServerUnavailable) as caught:
            await pool.list_tools("broken")
    message = caught.value.message
    assert f"Cannot find module '{missing}'" in message, message
    assert "MODULE_NOT_FOUND" in message


@pytest.mark.usefixtures("node_bin")
async def test_refused_call_after_restart_on_an_unrelated_status_is_reported(tmp_path: Path) -> None:
    # Restarted as a different server (Playwright, which answers 403 to this Host): the call is
    # re-initialized once, then the 403 is reported with its URL.
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with ServerPool(servers(remote={"url": url})) as pool:
        with _listening(_probe_http(port), port):
            spec = await pool.tool_spec("remote/echo")
        cmd = [str(NODE_BIN / "playwright-mcp"), "--port", str(port), "--headless", "--isolated"]
        with _listening(cmd, port):
            with pytest.raises((ServerUnavailable, UpstreamError), match=f"HTTP 403 from {url}"):
                await pool.call(spec, {"text": "x"})
