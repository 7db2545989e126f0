"""The tools router in tRPC's wire format: the real `@trpc/client` (Node) and raw requests."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.api_harness import LiveServer, User, live_server, probe_servers, provision
from _support.repo import REPO_ROOT

pytestmark = [pytest.mark.timeout(120), pytest.mark.node]

NODE_DIR = REPO_ROOT / "tests" / "node"
SCRIPT = NODE_DIR / "trpc_client_check.mjs"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, User], LiveServer]]:
    work = tmp_path_factory.mktemp("api_trpc")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(
        db,
        [
            ("bob", "execute_basic", "enterprise"),
            ("node", "execute_basic", "enterprise"),
            ("ann", "admin", "enterprise"),
        ],
    )
    with live_server(work, probe_servers(), db=db) as server:
        yield users, server


@pytest.fixture(scope="module")
def server(setup: tuple[dict[str, User], LiveServer]) -> LiveServer:
    return setup[1]


@pytest.fixture
def bob(setup: tuple[dict[str, User], LiveServer]) -> Iterator[httpx.Client]:
    users, server = setup
    with server.client(users["bob"]) as client:
        yield client


def q(value: object) -> dict[str, str]:
    return {"input": json.dumps(value)}


def test_real_trpc_client(setup: tuple[dict[str, User], LiveServer]) -> None:
    users, server = setup
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE_DIR / "node_modules" / "@trpc" / "client").is_dir():
        pytest.fail("@trpc/client is missing: run `npm ci` in tests/node (scripts/bootstrap --with-node)")
    # The registry's figures count every user's calls, the other tests' of this module included.
    with server.client(users["bob"]) as bob:
        metrics = bob.get("/trpc/tools.getToolMetrics", params=q({"toolName": "probe/echo"})).json()["result"]["data"]
    invocations_before = metrics["registryMetrics"]["totalInvocations"]
    done = subprocess.run(
        [node, str(SCRIPT), server.url, users["node"].key], capture_output=True, text=True, timeout=90, cwd=NODE_DIR
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)

    assert out["listTools"]["totalCount"] == 10 and "probe/echo" in out["listTools"]["names"]
    assert out["listTools"]["categories"] == ["memory", "agent"]
    assert out["listMemory"] == ["probe/echo"]
    executed = out["executeTool"]
    assert executed["success"] is True and executed["toolName"] == "probe/echo"
    assert executed["structured"] == {"text": "from trpc", "length": 9} and executed["executionTime"] > 0
    assert out["getToolStatus"] == {
        "id": executed["executionId"],
        "status": "success",
        "sessionId": "node-session",
        "metadata": {"source": "trpc_client_check"},
    }
    assert out["getToolHistory"]["ids"] == [executed["executionId"]] and out["getToolHistory"]["limit"] == 5
    assert out["getToolHistory"]["stats"]["success"] == 1
    assert out["getToolDetails"] == {"name": "probe/echo", "risk": "safe", "total": 1}
    assert out["getToolMetrics"]["registryMetrics"]["totalInvocations"] == invocations_before + 1
    assert out["cancel"]["startedId"] in out["cancel"]["activeIds"] and out["cancel"]["status"] == "cancelled"

    errors = out["errors"]
    expected = {
        "forbidden": ("FORBIDDEN", 403, -32003, "tools.executeTool"),
        "badRequest": ("BAD_REQUEST", 400, -32600, "tools.executeTool"),
        "badLimit": ("BAD_REQUEST", 400, -32600, "tools.getToolHistory"),
        "notFound": ("NOT_FOUND", 404, -32004, "tools.getToolStatus"),
        "toolFailed": ("INTERNAL_SERVER_ERROR", 500, -32603, "tools.executeTool"),
        "unauthorized": ("UNAUTHORIZED", 401, -32001, "tools.listTools"),
        "noProcedure": ("NOT_FOUND", 404, -32004, "tools.noSuchProcedure"),
    }
    for name, (code, status, number, path) in expected.items():
        seen = errors[name]
        assert seen["thrown"] is True, name
        assert (seen["code"], seen["httpStatus"], seen["shapeCode"], seen["path"]) == (code, status, number, path), seen
    assert "execute_basic" in errors["forbidden"]["message"] and "risk moderate" in errors["forbidden"]["message"]
    assert "timeout" in errors["badRequest"]["message"] and "limit" in errors["badLimit"]["message"]
    assert "deliberate failure" in errors["toolFailed"]["message"]
    assert out["batch"] == {"listCount": 3, "historyLimit": 1}


def test_query_and_mutation_wire_format(bob: httpx.Client) -> None:
    listed = bob.get("/trpc/tools.listTools", params=q({"category": "memory"}))
    assert listed.status_code == 200
    assert set(listed.json()) == {"result"} and listed.json()["result"]["data"]["totalCount"] == 3
    assert bob.get("/trpc/tools.listTools").json()["result"]["data"]["totalCount"] == 10  # no input
    assert bob.get("/trpc/tools.getActiveExecutions").json()["result"]["data"]["count"] == 0

    executed = bob.post("/trpc/tools.executeTool", json={"name": "probe/echo", "arguments": {"text": "raw"}})
    assert executed.status_code == 200
    data = executed.json()["result"]["data"]
    assert data["result"]["structuredContent"]["text"] == "raw"
    assert "X-RateLimit-Limit" in executed.headers and "X-RateLimit-Remaining" in executed.headers
    status = bob.get("/trpc/tools.getToolStatus", params=q({"executionId": data["executionId"]}))
    assert status.json()["result"]["data"]["execution"]["status"] == "success"


def test_error_shapes(server: LiveServer, bob: httpx.Client) -> None:
    def error(response: httpx.Response, status: int, code: str, number: int) -> dict:
        assert response.status_code == status, response.text
        body = response.json()
        assert set(body) == {"error"} and body["error"]["code"] == number
        assert body["error"]["data"]["code"] == code and body["error"]["data"]["httpStatus"] == status
        assert "Traceback" not in response.text and "stack" not in body["error"]["data"]
        return body["error"]

    e = error(bob.post("/trpc/tools.listTools", json={}), 405, "METHOD_NOT_SUPPORTED", -32005)
    assert e["data"]["path"] == "tools.listTools"
    error(bob.get("/trpc/tools.executeTool", params=q({"name": "probe/echo"})), 405, "METHOD_NOT_SUPPORTED", -32005)
    error(bob.get("/trpc/tools.listTools", params={"input": "{nope"}), 400, "PARSE_ERROR", -32700)
    e = error(bob.get("/trpc/tools.getToolHistory", params=q({"limit": 101, "offset": -1})), 400, "BAD_REQUEST", -32600)
    assert "limit" in e["message"] and "offset" in e["message"]
    assert {f["field"] for f in e["data"]["fields"]} == {"limit", "offset"}
    error(bob.get("/trpc/tools.getToolStatus"), 400, "BAD_REQUEST", -32600)  # required input missing
    error(bob.get("/trpc/other.listTools"), 404, "NOT_FOUND", -32004)
    e = error(
        bob.post("/trpc/tools.executeTool", json={"name": "probe/add", "arguments": {"a": 1, "b": 2}}),
        403,
        "FORBIDDEN",
        -32003,
    )
    assert "bob" in e["message"] and "probe/add" in e["message"]
    e = error(bob.post("/trpc/tools.executeTool", json={"name": "probe/fail"}), 500, "INTERNAL_SERVER_ERROR", -32603)
    assert e["data"]["details"]["executionId"].startswith("exec_")
    with httpx.Client(base_url=server.url) as anonymous:
        error(anonymous.get("/trpc/tools.listTools"), 401, "UNAUTHORIZED", -32001)
        error(anonymous.get("/trpc/tools.listTools", headers={"X-API-Key": "ta_bad"}), 401, "UNAUTHORIZED", -32001)


def test_batches(bob: httpx.Client) -> None:
    both = bob.get(
        "/trpc/tools.listTools,tools.getToolHistory",
        params={"batch": "1", "input": json.dumps({"0": {"category": "memory"}, "1": {"limit": 2}})},
    )
    assert both.status_code == 200
    listed, history = both.json()
    assert listed["result"]["data"]["totalCount"] == 3 and history["result"]["data"]["limit"] == 2

    mixed = bob.get(
        "/trpc/tools.listTools,tools.getToolHistory", params={"batch": "1", "input": json.dumps({"1": {"limit": 500}})}
    )
    assert mixed.status_code == 207
    ok, bad = mixed.json()
    assert ok["result"]["data"]["totalCount"] == 10 and bad["error"]["data"]["code"] == "BAD_REQUEST"

    mutations = bob.post(
        "/trpc/tools.executeTool,tools.executeTool?batch=1",
        json={
            "0": {"name": "probe/echo", "arguments": {"text": "a"}},
            "1": {"name": "probe/echo", "arguments": {"text": "b"}},
        },
    )
    assert mutations.status_code == 200
    texts = [r["result"]["data"]["result"]["structuredContent"]["text"] for r in mutations.json()]
    assert texts == ["a", "b"]
    assert (
        bob.get("/trpc/tools.listTools", params={"batch": "1", "input": "[1]"}).json()[0]["error"]["data"]["code"]
        == "BAD_REQUEST"
    )
