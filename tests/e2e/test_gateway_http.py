"""The MCP gateway at `/mcp` of a live `serve` process, driven by the `mcp` SDK's client over
streamable HTTP, fronting real servers: `server-everything` (node), the Supabase demo server and
the probe server (which logs the cancellations it receives)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from _support.api_harness import LiveServer, User, live_server, probe_servers, provision, revoke
from _support.mcp_harness import node_config, read_log
from _support.repo import NODE_BIN, REPO_ROOT
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client

from toolagent.gateway.names import gateway_name
from toolagent.gateway.server import EXECUTION_META

pytestmark = pytest.mark.timeout(180)

#: Risk and category of the everything server's tools used here (the rest stay unclassified: dangerous).
EVERYTHING = {
    **node_config("mcp-server-everything", "stdio"),
    "risk": {"echo": "safe", "get-sum": "moderate", "get-structured-content": "safe"},
    "category": {"echo": "memory"},
}
#: The probe's tools in the `memory` category, and the everything server's echo.
MEMORY_TOOLS = {"probe__echo", "probe__make-number", "probe__double", "everything__echo"}


@pytest.fixture(scope="module")
def probe_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the probe server notes its calls and cancellations."""
    return tmp_path_factory.mktemp("gateway-probe") / "probe.jsonl"


@pytest.fixture(scope="module")
def users_and_server(
    tmp_path_factory: pytest.TempPathFactory, probe_log: Path
) -> Iterator[tuple[dict[str, User], LiveServer]]:
    """One server for the module: an admin, an execute_basic user, an admin with a key scoped to
    `memory`, and a user whose key gets revoked."""
    workdir = tmp_path_factory.mktemp("gateway-http")
    db = f"sqlite+aiosqlite:///{workdir / 'api.db'}"
    users = provision(
        db,
        [
            ("root", "admin", "enterprise"),
            ("basic", "execute_basic", "enterprise"),
            ("scoped", "admin", "enterprise"),
            ("leaving", "admin", "enterprise"),
        ],
        scopes={"scoped": ["agent:execute:memory"]},
    )
    supabase = {
        "command": sys.executable,
        "args": ["-m", "toolagent.servers.supabase"],
        "env": {"SUPABASE_DEMO_DB": str(workdir / "demo.sqlite"), "SUPABASE_ALLOWED_TABLES": "users,kpi_data"},
        "timeout_s": 60,
        "risk": "safe",
        "category": "database",
        "sql_tools": ["execute-sql"],
    }
    servers = {**probe_servers(probe_log), "everything": EVERYTHING, "supabase": supabase}
    with live_server(workdir, servers, db=db) as server:
        yield users, server


@pytest.fixture(scope="module")
def server(users_and_server: tuple[dict[str, User], LiveServer]) -> LiveServer:
    return users_and_server[1]


@pytest.fixture(scope="module")
def users(users_and_server: tuple[dict[str, User], LiveServer]) -> dict[str, User]:
    return users_and_server[0]


@contextlib.asynccontextmanager
async def session(server: LiveServer, key: str | None) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the gateway, authenticated with `key`."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=60) as s,
    ):
        with anyio.fail_after(60):
            await s.initialize()
        yield s


def listed(server: LiveServer, user: User) -> dict[str, Any]:
    """The gateway's tool list for `user`, by name."""

    async def body() -> dict[str, Any]:
        async with session(server, user.key) as s:
            return {t.name: t for t in (await s.list_tools()).tools}

    return anyio.run(body)


def call(server: LiveServer, user: User, name: str, arguments: dict[str, Any]) -> Any:
    """One call through the gateway as `user`; its `CallToolResult`."""

    async def body() -> Any:
        async with session(server, user.key) as s:
            return await s.call_tool(name, arguments)

    return anyio.run(body)


def rest_tools(server: LiveServer, user: User) -> dict[str, dict[str, Any]]:
    """The REST listing for `user`, by qualified name."""
    with server.client(user) as c:
        response = c.get("/api/tools")
    assert response.status_code == 200, response.text
    return {t["name"]: t for t in response.json()["tools"]}


def execution(server: LiveServer, user: User, execution_id: str) -> dict[str, Any]:
    with server.client(user) as c:
        response = c.get(f"/api/tools/executions/{execution_id}")
    assert response.status_code == 200, response.text
    return response.json()["execution"]


# -- authentication ---------------------------------------------------------------------------------

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.parametrize("authorization", [None, "Bearer ta_not-a-real-key-at-all-000000", "Basic dXNlcjpwYXNz"])
def test_a_missing_or_bad_key_gets_401_with_a_bearer_challenge(server: LiveServer, authorization: str | None) -> None:
    headers = {**MCP_HEADERS, **({"Authorization": authorization} if authorization else {})}
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers, timeout=30)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer ")
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_foreign_origin_is_refused_and_a_loopback_one_passes(server: LiveServer, users: dict[str, User]) -> None:
    auth = {**MCP_HEADERS, **users["root"].auth}
    foreign = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers={**auth, "Origin": "http://evil.example"})
    assert foreign.status_code == 403
    assert "TOOLAGENT_GATEWAY_ALLOWED_ORIGINS" in foreign.text
    local = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers={**auth, "Origin": "http://localhost:5173"})
    assert local.status_code == 200, local.text


def test_a_revoked_key_stops_its_open_session_at_once(server: LiveServer, users: dict[str, User]) -> None:
    user = users["leaving"]

    async def body() -> None:
        async with session(server, user.key) as s:
            assert (await s.call_tool("probe__echo", {"text": "before"})).is_error is False
            await anyio.to_thread.run_sync(revoke, server.db, user.key_id)
            with pytest.raises(MCPError):
                with anyio.fail_after(30):
                    await s.call_tool("probe__echo", {"text": "after"})

    anyio.run(body)
    response = httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **user.auth})
    assert response.status_code == 401


# -- what each caller sees -------------------------------------------------------------------------------


def test_each_caller_sees_exactly_what_it_may_run(server: LiveServer, users: dict[str, User]) -> None:
    everything = rest_tools(server, users["root"])
    admin = set(listed(server, users["root"]))
    assert admin == {gateway_name(n) for n in everything}
    basic = set(listed(server, users["basic"]))
    assert basic == {gateway_name(n) for n, t in everything.items() if t["risk"] == "safe"}
    assert "everything__echo" in basic and "everything__get-sum" not in basic and "probe__query" not in basic
    assert set(listed(server, users["scoped"])) == MEMORY_TOOLS


def test_names_schemas_and_annotations_follow_toolagents_rating(server: LiveServer, users: dict[str, User]) -> None:
    tools = listed(server, users["root"])
    for name in tools:
        assert len(name) <= 64 and all(c.isalnum() or c in "_-" for c in name), name
    echo = tools["everything__echo"]
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    assert echo.annotations.read_only_hint is True and echo.annotations.destructive_hint is False
    get_sum = tools["everything__get-sum"]  # moderate: writes, never read-only
    assert get_sum.annotations.read_only_hint is False
    unrated = tools["everything__get-env"]  # unclassified, so dangerous, whatever the server hints
    assert unrated.annotations.read_only_hint is False and unrated.annotations.destructive_hint is True
    assert tools["everything__get-structured-content"].output_schema is not None


# -- calls -----------------------------------------------------------------------------------------------


def test_a_call_runs_through_the_governed_stack_and_its_audit_names_the_gateway(
    server: LiveServer, users: dict[str, User]
) -> None:
    result = call(server, users["basic"], "everything__get-structured-content", {"location": "New York"})
    assert result.is_error is False, result.content
    assert set(result.structured_content) >= {"temperature", "conditions"}
    execution_id = result.meta[EXECUTION_META]
    record = execution(server, users["basic"], execution_id)
    assert record["status"] == "success" and record["toolName"] == "everything/get-structured-content"
    assert record["apiKeyId"] == users["basic"].key_id
    assert record["metadata"]["gateway"]["client"].startswith("mcp")
    assert record["metadata"]["gateway"]["toolList"].startswith("sha256:")

    reasons = audit_reasons(server, execution_id)
    assert len(reasons) == 2  # the decision and the outcome
    for reason in reasons:
        assert "via gateway, client mcp" in reason
        assert record["metadata"]["gateway"]["toolList"] in reason


def test_the_tool_list_digest_differs_between_callers_who_see_different_lists(
    server: LiveServer, users: dict[str, User]
) -> None:
    basic = call(server, users["basic"], "probe__echo", {"text": "a"})
    scoped = call(server, users["scoped"], "probe__echo", {"text": "b"})
    digest_of = {
        name: execution(server, users[name], r.meta[EXECUTION_META])["metadata"]["gateway"]["toolList"]
        for name, r in (("basic", basic), ("scoped", scoped))
    }
    assert digest_of["basic"] != digest_of["scoped"]


def test_a_tool_outside_the_callers_list_is_refused_and_the_refusal_recorded(
    server: LiveServer, users: dict[str, User]
) -> None:
    result = call(server, users["basic"], "everything__get-sum", {"a": 1, "b": 2})
    assert result.is_error is True
    text = result.content[0].text
    assert text.startswith("denied: ") and "execute_basic" in text
    record = execution(server, users["basic"], result.meta[EXECUTION_META])
    assert record["denied"] is True and record["denial"] == "level", record


def test_an_unknown_name_is_a_protocol_error(server: LiveServer, users: dict[str, User]) -> None:
    async def body() -> str:
        async with session(server, users["root"].key) as s:
            try:
                await s.call_tool("nobody__nothing", {})
            except MCPError as exc:
                return exc.error.message
        return "no error"

    assert "unknown tool 'nobody__nothing'" in anyio.run(body)


def test_the_supabase_demo_server_answers_through_the_gateway(server: LiveServer, users: dict[str, User]) -> None:
    result = call(server, users["basic"], "supabase__get-schema", {"tables": ["users"]})
    assert result.is_error is False, result.content
    assert "users" in json.dumps(result.structured_content)


def test_a_client_cancel_cancels_the_execution_and_reaches_the_upstream_server(
    server: LiveServer, users: dict[str, User], probe_log: Path
) -> None:
    tag = "gateway-cancel"

    async def body() -> None:
        async with session(server, users["root"].key) as s:
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:

                    async def slow() -> None:
                        await s.call_tool("probe__sleep", {"seconds": 60, "tag": tag})

                    tg.start_soon(slow)
                    while not any(e.get("tag") == tag and e.get("event") == "call" for e in read_log(probe_log)):
                        await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled for the request
            # The session stays usable.
            assert (await s.call_tool("probe__echo", {"text": "still here"})).is_error is False

    anyio.run(body)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(e.get("tag") == tag and e.get("event") == "cancelled" for e in read_log(probe_log)):
            break
        time.sleep(0.05)
    assert any(e.get("tag") == tag and e.get("event") == "cancelled" for e in read_log(probe_log)), read_log(probe_log)
    with server.client(users["root"]) as c:
        rows = c.get("/api/tools/history", params={"toolName": "probe/sleep", "limit": 10}).json()["executions"]
    statuses = [r["status"] for r in rows if (r.get("arguments") or {}).get("tag") == tag]
    deadline = time.monotonic() + 30
    while statuses != ["cancelled"] and time.monotonic() < deadline:
        time.sleep(0.1)
        with server.client(users["root"]) as c:
            rows = c.get("/api/tools/history", params={"toolName": "probe/sleep", "limit": 10}).json()["executions"]
        statuses = [r["status"] for r in rows if (r.get("arguments") or {}).get("tag") == tag]
    assert statuses == ["cancelled"]


def test_metadata_naming_the_gateway_is_dropped_from_other_callers(server: LiveServer, users: dict[str, User]) -> None:
    spoof = {"gateway": {"client": "forged 1.0", "toolList": "sha256:0"}}
    with server.client(users["root"]) as c:
        response = c.post(
            "/api/tools/execute",
            json={"name": "probe/echo", "arguments": {"text": "x"}, "context": {"metadata": spoof}},
        )
    assert response.status_code == 200, response.text
    execution_id = response.json()["executionId"]
    assert "gateway" not in (execution(server, users["root"], execution_id)["metadata"] or {})
    assert not any("via gateway" in reason for reason in audit_reasons(server, execution_id))


def audit_reasons(server: LiveServer, execution_id: str) -> list[str]:
    """The reasons of the audit rows about one execution."""
    from toolagent.engine.audit import AuditLog
    from toolagent.store import open_store

    async def body() -> list[str]:
        async with open_store(server.db) as store:
            return [r.reason or "" for r in await AuditLog(store.db).query(execution_id=execution_id)]

    return anyio.run(body)


# -- a second client implementation: the TypeScript SDK ---------------------------------------------------


def test_the_typescript_sdk_lists_and_calls_with_a_bearer_key(server: LiveServer, users: dict[str, User]) -> None:
    script = REPO_ROOT / "tests" / "node" / "mcp_gateway_client.mjs"
    node = NODE_BIN.parent.parent / "node_modules" / "@modelcontextprotocol" / "sdk"
    if not node.exists():
        pytest.skip("tests/node/node_modules lacks @modelcontextprotocol/sdk: run scripts/bootstrap --with-node")
    done = subprocess.run(
        [
            "node",
            str(script),
            f"{server.url}/mcp",
            users["basic"].key,
            "everything__echo",
            json.dumps({"message": "hi"}),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "everything__echo" in report["tools"] and "everything__get-sum" not in report["tools"]
    assert report["result"]["isError"] is False
    assert report["result"]["content"][0]["text"] == "Echo: hi"
    refused = subprocess.run(
        ["node", str(script), f"{server.url}/mcp", "ta_bad-key-000000000000000000", "everything__echo", "{}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode != 0 and "401" in refused.stderr
