"""`toolagent gateway --stdio` driven by the `mcp` SDK's stdio client, and `toolagent gateway tools`,
fronting `server-everything` and the Supabase demo server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support.api_harness import provision
from _support.mcp_harness import node_config
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A store with an execute_basic user, and a servers file."""
    workdir = tmp_path_factory.mktemp("gateway-stdio")
    db = f"sqlite+aiosqlite:///{workdir / 'store.db'}"
    provision(db, [("basic", "execute_basic", "enterprise")])
    servers = {
        "everything": {**node_config("mcp-server-everything", "stdio"), "risk": {"echo": "safe"}},
        "supabase": {
            "command": sys.executable,
            "args": ["-m", "toolagent.servers.supabase"],
            "env": {"SUPABASE_DEMO_DB": str(workdir / "demo.sqlite"), "SUPABASE_ALLOWED_TABLES": "users"},
            "timeout_s": 60,
            "risk": "safe",
            "category": "database",
        },
    }
    servers_file = workdir / "mcp.json"
    servers_file.write_text(json.dumps({"mcpServers": servers}))
    return db, servers_file


def cli(db: str, servers: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "toolagent.cli", "--db", db, "--servers", str(servers), *args]


def test_a_stdio_client_sees_and_runs_what_the_user_may(setup: tuple[str, Path]) -> None:
    db, servers = setup
    command, *args = cli(db, servers, "gateway", "--stdio", "--user", "basic")
    params = StdioServerParameters(command=command, args=args, env=dict(os.environ))

    async def body() -> dict[str, Any]:
        async with stdio_client(params) as (read, write), ClientSession(read, write, read_timeout_seconds=60) as s:
            with anyio.fail_after(90):
                await s.initialize()
                tools = {t.name for t in (await s.list_tools()).tools}
                echo = await s.call_tool("everything__echo", {"message": "over stdio"})
                schema = await s.call_tool("supabase__get-schema", {"tables": ["users"]})
                refused = await s.call_tool("everything__get-env", {})
            return {"tools": tools, "echo": echo, "schema": schema, "refused": refused}

    seen = anyio.run(body)
    assert "everything__echo" in seen["tools"] and "supabase__get-schema" in seen["tools"]
    assert "everything__get-env" not in seen["tools"]  # unclassified: dangerous, beyond execute_basic
    assert seen["echo"].content[0].text == "Echo: over stdio"
    assert seen["schema"].is_error is False and "users" in json.dumps(seen["schema"].structured_content)
    assert seen["refused"].is_error is True and seen["refused"].content[0].text.startswith("denied: ")


def test_gateway_tools_prints_the_mapping(setup: tuple[str, Path]) -> None:
    db, servers = setup
    done = subprocess.run(cli(db, servers, "--json", "gateway", "tools"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert rows["everything__echo"]["tool"] == "everything/echo" and rows["everything__echo"]["readOnly"] is True
    assert rows["supabase__get-schema"]["tool"] == "supabase/get-schema"


def test_gateway_without_a_transport_says_how_to_serve(setup: tuple[str, Path]) -> None:
    db, servers = setup
    done = subprocess.run(cli(db, servers, "gateway"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "toolagent gateway --stdio" in done.stderr
