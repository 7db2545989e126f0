"""The Supabase MCP server over streamable HTTP on 127.0.0.1 (a real subprocess)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One HTTP server process for the module; ready once uvicorn says it is listening."""
    port = _free_port()
    env = {**os.environ, "SUPABASE_DEMO_DB": str(tmp_path_factory.mktemp("supabase-http") / "demo.sqlite")}
    env.pop("SUPABASE_BACKEND", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolagent.servers.supabase",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = threading.Event()
    lines: list[str] = []

    def drain() -> None:  # keep reading, or the server blocks on a full pipe
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "Uvicorn running on" in line:
                ready.set()
        ready.set()  # the process ended; the check below reports it

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert ready.wait(timeout=60), "server did not start within 60 s"
        assert proc.poll() is None, "".join(lines)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        reader.join(timeout=5)


async def call(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args, read_timeout_seconds=60)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def test_the_four_tools_over_http(server_url: str) -> None:
    with anyio.fail_after(90):
        async with Client(server_url) as client:
            schema = await call(client, "get-schema", {"tables": ["kpi_data", "kpi_metrics"]})
            assert [t["name"] for t in schema["tables"]] == ["kpi_data", "kpi_metrics"]
            generated = await call(client, "generate-sql", {"query": "average kpi value per metric"})
            assert generated["tables"] == ["kpi_data", "kpi_metrics"]
            result = await call(client, "execute-sql", {"sql": generated["sql"]})
            assert result["row_count"] == 10
            analysis = await call(client, "analyze-results", {"rows": result["rows"]})
            assert "**10 rows**" in analysis["summary"]


async def test_rejection_over_http(server_url: str) -> None:
    with anyio.fail_after(60):
        async with Client(server_url) as client:
            result = await client.call_tool("execute-sql", {"sql": "DROP TABLE users"}, read_timeout_seconds=60)
    assert result.is_error and "statement type DROP is denied" in result.content[0].text  # type: ignore[union-attr]
