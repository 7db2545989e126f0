"""The tools router's REST routes over a live server: auth, permissions, limits, validation,
execution (sync and async), cancellation, history, metrics and per-user isolation."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from _support.api_harness import LiveServer, User, as_user, live_server, probe_servers, provision, revoke, server, users  # noqa: F401  (fixtures)
from _support.repo import seconds_to_a_fresh_minute

pytestmark = pytest.mark.timeout(120)

RATE_LIMIT = 5
ENGINE_CONFIG = {
    "plans": {
        "enterprise": {"rate_per_minute": 100_000},
        "starter": {"rate_per_minute": RATE_LIMIT, "monthly_budget": None},
    },
    "cancel_poll_ms": 50,
}
USERS = [
    ("ann", "admin", "enterprise"),
    ("adv", "execute_advanced", "enterprise"),
    ("bob", "execute_basic", "enterprise"),
    ("carol", "execute_basic", "enterprise"),
    ("viewer", "view_only", "enterprise"),
    ("hist", "execute_advanced", "enterprise"),
    ("limited", "execute_basic", "starter"),
    ("scoped", "execute_advanced", "enterprise"),
    ("gone", "execute_basic", "enterprise"),
    ("memadmin", "admin", "enterprise"),
]


@pytest.fixture(scope="module")
def users_and_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, User], LiveServer]]:
    work = tmp_path_factory.mktemp("api_tools")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(db, USERS, scopes={"scoped": ["agent:execute:memory"], "memadmin": ["agent:execute:memory"]})
    with live_server(work, probe_servers(), engine_config=ENGINE_CONFIG, db=db) as server:
        yield users, server


def execute(client: httpx.Client, name: str, arguments: dict | None = None, **extra: object) -> httpx.Response:
    return client.post("/api/tools/execute", json={"name": name, "arguments": arguments or {}, **extra})


def assert_error(response: httpx.Response, status: int, code: str, *needles: str) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code
    for needle in needles:
        assert needle in body["error"]["message"], body["error"]["message"]
    assert "Traceback" not in response.text
    return body


def wait_status(client: httpx.Client, execution_id: str, wanted: str, timeout_s: float = 10) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        execution = client.get(f"/api/tools/executions/{execution_id}").json()["execution"]
        if execution["status"] == wanted or time.monotonic() > deadline:
            return execution
        time.sleep(0.05)


# -- authentication ----------------------------------------------------------------------------


def test_every_route_needs_a_valid_key(server: LiveServer, users: dict[str, User]) -> None:
    routes = [
        ("GET", "/api/tools"),
        ("POST", "/api/tools/execute"),
        ("GET", "/api/tools/executions/active"),
        ("GET", "/api/tools/executions/exec_1_x"),
        ("POST", "/api/tools/executions/exec_1_x/cancel"),
        ("GET", "/api/tools/history"),
        ("GET", "/api/tools/metrics"),
        ("GET", "/api/tools/probe/echo"),
    ]
    with httpx.Client(base_url=server.url) as anonymous:
        assert anonymous.get("/health").status_code == 200
        for method, path in routes:
            body = {"name": "probe/echo", "arguments": {"text": "x"}} if path.endswith("execute") else None
            for headers in (
                {},
                {"Authorization": "Bearer ta_wrong"},
                {"Authorization": "Basic abc"},
                {"X-API-Key": "nope"},
            ):
                response = anonymous.request(method, path, json=body, headers=headers)
                assert_error(response, 401, "UNAUTHORIZED")
                assert response.headers["WWW-Authenticate"] == 'Bearer realm="toolagent"'


def test_x_api_key_header_and_revoked_key(server: LiveServer, users: dict[str, User]) -> None:
    gone = users["gone"]
    with httpx.Client(base_url=server.url) as client:
        assert client.get("/api/tools", headers={"X-API-Key": gone.key}).status_code == 200
        assert client.get("/api/tools", headers={"authorization": f"bearer {gone.key}"}).status_code == 200
        revoke(server.db, gone.key_id)
        response = client.get("/api/tools", headers={"X-API-Key": gone.key})
        assert_error(response, 401, "UNAUTHORIZED", "revoked")
        assert_error(client.get("/api/tools", headers=gone.auth), 401, "UNAUTHORIZED", "revoked")


# -- listTools / getToolDetails ------------------------------------------------------------------


def test_list_tools_filters_and_marks_runnable(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    listed = bob.get("/api/tools").json()
    assert listed["success"] is True and listed["totalCount"] == 10
    assert listed["categories"] == ["memory", "agent"]
    assert sorted(t["name"] for t in listed["categorizedTools"]["memory"]) == [
        "probe/double",
        "probe/echo",
        "probe/make-number",
    ]
    runnable = {t["name"]: t["runnable"] for t in listed["tools"]}
    assert runnable["probe/echo"] is True and runnable["probe/add"] is False and runnable["probe/query"] is False
    echo = next(t for t in listed["tools"] if t["name"] == "probe/echo")
    assert echo["inputSchema"]["required"] == ["text"] and echo["risk"] == "safe"

    memory = bob.get("/api/tools", params={"category": "memory"}).json()
    assert memory["totalCount"] == 3 and memory["categories"] == ["memory"]
    found = bob.get("/api/tools", params={"search": "SLEEP", "includeDeprecated": "true"}).json()
    assert [t["name"] for t in found["tools"]] == ["probe/sleep"]
    assert bob.get("/api/tools", params={"tags": "nope"}).json()["totalCount"] == 0
    assert_error(bob.get("/api/tools", params={"category": "kitchen"}), 400, "BAD_REQUEST", "category")


@pytest.mark.parametrize("name", ["memadmin", "scoped", "bob", "viewer", "ann"])
def test_a_listing_shows_what_the_caller_can_really_run(as_user: dict[str, httpx.Client], name: str) -> None:
    # A key scoped to `memory` sees only memory tools; REST, tRPC and details agree with a call.
    client = as_user[name]
    rest = client.get("/api/tools").json()
    trpc = client.get("/trpc/tools.listTools").json()["result"]["data"]
    assert {t["name"]: t["runnable"] for t in rest["tools"]} == {t["name"]: t["runnable"] for t in trpc["tools"]}
    if name in ("memadmin", "scoped"):
        assert rest["categories"] == ["memory"] and {t["category"] for t in rest["tools"]} == {"memory"}
    for listed in rest["tools"]:
        tool = listed["name"]
        assert client.get(f"/api/tools/{tool}").json()["tool"]["runnable"] is listed["runnable"], tool
        if tool == "probe/sleep":
            continue  # runs for as long as asked; its risk and category are covered by the others
        called = execute(client, tool, {})  # allowed: 200, or 400 for the missing arguments
        assert (called.status_code != 403) is listed["runnable"], (tool, called.text)


def test_tool_details_with_slash_in_the_name(as_user: dict[str, httpx.Client]) -> None:
    adv = as_user["adv"]
    assert execute(adv, "probe/double", {"value": 2}).status_code == 200
    details = adv.get("/api/tools/probe/double").json()
    assert details["success"] is True
    assert details["tool"]["name"] == "probe/double" and details["tool"]["category"] == "memory"
    assert details["tool"]["inputSchema"]["properties"]["value"]["type"] == "number"
    assert details["metrics"]["totalInvocations"] >= 1
    assert details["userStats"]["totalExecutions"] == 1 and details["userStats"]["successfulExecutions"] == 1
    assert_error(adv.get("/api/tools/probe/nope"), 404, "NOT_FOUND", "probe/nope")
    assert_error(adv.get("/api/tools/nothing"), 404, "NOT_FOUND")


# -- executeTool ---------------------------------------------------------------------------------


def test_execute_waits_for_the_result_with_rate_headers(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    first = execute(
        bob,
        "probe/echo",
        {"text": "hello"},
        timeout=10_000,
        context={"sessionId": "s-1", "metadata": {"source": "test", "password": "hunter2"}},
    )
    assert first.status_code == 200, first.text
    body = first.json()
    assert body["success"] is True and body["toolName"] == "probe/echo" and body["status"] == "success"
    assert body["executionId"].startswith("exec_")
    assert body["result"]["structuredContent"] == {"text": "hello", "length": 5}
    assert body["executionTimeMs"] == body["executionTime"] > 0
    assert datetime.fromisoformat(body["timestamp"]).tzinfo is not None
    assert first.headers["X-RateLimit-Limit"] == "100000"
    assert 0 <= int(first.headers["X-RateLimit-Reset"]) <= 60
    second = execute(bob, "probe/echo", {"text": "again"})
    assert int(second.headers["X-RateLimit-Remaining"]) < int(first.headers["X-RateLimit-Remaining"])

    execution = bob.get(f"/api/tools/executions/{body['executionId']}").json()["execution"]
    assert execution["status"] == "success" and execution["sessionId"] == "s-1" and execution["timeout"] == 10_000
    assert execution["metadata"]["source"] == "test" and execution["metadata"]["password"] != "hunter2"
    assert execution["userId"] == "bob" and execution["endTime"] is not None


@pytest.mark.parametrize(
    ("user", "tool", "arguments", "allowed", "needles"),
    [
        ("viewer", "probe/echo", {"text": "x"}, False, ("viewer", "view_only", "probe/echo", "risk safe")),
        ("bob", "probe/echo", {"text": "x"}, True, ()),
        ("bob", "probe/add", {"a": 1, "b": 2}, False, ("bob", "execute_basic", "probe/add", "risk moderate")),
        ("adv", "probe/add", {"a": 1, "b": 2}, True, ()),
        (
            "adv",
            "probe/query",
            {"sql": "select 1"},
            False,
            ("adv", "execute_advanced", "probe/query", "risk dangerous"),
        ),
        ("ann", "probe/query", {"sql": "select 1"}, True, ()),
    ],
)
def test_permission_matrix(
    as_user: dict[str, httpx.Client], user: str, tool: str, arguments: dict, allowed: bool, needles: tuple[str, ...]
) -> None:
    response = execute(as_user[user], tool, arguments)
    if allowed:
        assert response.status_code == 200, response.text
    else:
        body = assert_error(response, 403, "FORBIDDEN", *needles)
        # The refusal is recorded, and the answer names the record.
        denied = as_user[user].get(f"/api/tools/executions/{body['error']['details']['executionId']}").json()
        assert (denied["execution"]["status"], denied["execution"]["toolName"]) == ("failed", tool)
        # The same fix the CLI prints: raise the level, or (for a level that runs something) re-rate the tool.
        fix = body["error"]["details"]["fix"]
        assert f"toolagent users set-level {user} " in fix
        assert ('"trusted": true' in fix) == (user != "viewer")
    assert "X-RateLimit-Remaining" in response.headers


def test_api_key_scope_limits_categories(as_user: dict[str, httpx.Client]) -> None:
    scoped = as_user["scoped"]
    assert execute(scoped, "probe/echo", {"text": "memory tool"}).status_code == 200
    assert_error(execute(scoped, "probe/pid"), 403, "FORBIDDEN", "scope", "agent:execute:agent")


def test_invalid_input_is_400_naming_each_field(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    for timeout in (999, 300_001, 1.5, "soon"):
        body = assert_error(execute(bob, "probe/echo", {"text": "x"}, timeout=timeout), 400, "BAD_REQUEST", "timeout")
        assert body["error"]["details"][0]["field"] == "timeout"
    assert execute(bob, "probe/echo", {"text": "x"}, timeout=1000).status_code == 200
    assert execute(bob, "probe/echo", {"text": "x"}, timeout=300_000).status_code == 200

    body = assert_error(
        bob.post("/api/tools/execute", json={"arguments": {}, "timeout": 5, "colour": "red"}),
        400,
        "BAD_REQUEST",
        "name",
        "timeout",
        "colour",
    )
    assert {d["field"] for d in body["error"]["details"]} == {"name", "timeout", "colour"}
    assert_error(
        bob.post("/api/tools/execute", content=b"{not json", headers={"Content-Type": "application/json"}),
        400,
        "BAD_REQUEST",
    )
    assert_error(execute(bob, "probe/echo", {"text": 5}), 400, "BAD_REQUEST", "`text`")
    assert_error(execute(bob, "probe/echo", {}), 400, "BAD_REQUEST", "'text' is a required property")
    assert_error(execute(bob, "probe/missing"), 404, "NOT_FOUND", "probe/missing")
    assert_error(execute(bob, "elsewhere/tool"), 404, "NOT_FOUND", "elsewhere/tool")

    for params, field in (
        ({"limit": 101}, "limit"),
        ({"limit": 0}, "limit"),
        ({"offset": -1}, "offset"),
        ({"status": "done"}, "status"),
        ({"startDate": "yesterday"}, "startDate"),
        ({"category": "nope"}, "category"),
    ):
        assert_error(bob.get("/api/tools/history", params=params), 400, "BAD_REQUEST", field)
    assert_error(
        bob.get("/api/tools/history", params={"startDate": "2026-01-02", "endDate": "2026-01-01"}),
        400,
        "BAD_REQUEST",
        "endDate",
        "startDate",
    )


def test_failed_tool_is_500_with_its_message(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    response = execute(bob, "probe/fail", {"message": "the disk is on fire"})
    body = assert_error(response, 500, "INTERNAL_SERVER_ERROR", "probe/fail", "the disk is on fire")
    assert "X-RateLimit-Remaining" in response.headers
    execution = bob.get(f"/api/tools/executions/{body['error']['details']['executionId']}").json()["execution"]
    assert execution["status"] == "failed" and "the disk is on fire" in execution["error"]


def test_timeout_ends_the_call(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    started = time.monotonic()
    response = execute(bob, "probe/sleep", {"seconds": 20}, timeout=1000)
    assert time.monotonic() - started < 10
    body = assert_error(response, 500, "INTERNAL_SERVER_ERROR", "timed out after 1000 ms")
    execution = bob.get(f"/api/tools/executions/{body['error']['details']['executionId']}").json()["execution"]
    assert execution["status"] == "cancelled" and execution["reason"] == "timeout after 1000 ms"


# -- async execution, status, cancellation, isolation -------------------------------------------


def test_async_execute_poll_and_cancel(as_user: dict[str, httpx.Client]) -> None:
    bob, carol, ann = as_user["bob"], as_user["carol"], as_user["ann"]
    accepted = execute(bob, "probe/sleep", {"seconds": 60, "tag": "async"}, timeout=120_000, **{"async": True})
    assert accepted.status_code == 202, accepted.text
    assert "X-RateLimit-Remaining" in accepted.headers
    execution_id = accepted.json()["executionId"]
    assert accepted.json()["links"]["status"] == f"/api/tools/executions/{execution_id}"

    status = bob.get(f"/api/tools/executions/{execution_id}").json()["execution"]
    assert status["status"] == "running" and status["runningTime"] >= 0 and status["endTime"] is None
    active = bob.get("/api/tools/executions/active").json()
    assert execution_id in [e["id"] for e in active["executions"]] and active["count"] == len(active["executions"])

    # Another user sees nothing of it and cannot cancel it; an admin sees it.
    assert_error(carol.get(f"/api/tools/executions/{execution_id}"), 404, "NOT_FOUND")
    assert_error(carol.post(f"/api/tools/executions/{execution_id}/cancel"), 404, "NOT_FOUND")
    assert execution_id not in [e["id"] for e in carol.get("/api/tools/executions/active").json()["executions"]]
    assert all(e["userId"] == "carol" for e in carol.get("/api/tools/history").json()["executions"])
    assert ann.get(f"/api/tools/executions/{execution_id}").json()["execution"]["userId"] == "bob"
    assert execution_id in [e["id"] for e in ann.get("/api/tools/executions/active").json()["executions"]]

    cancelled = bob.post(f"/api/tools/executions/{execution_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["message"] == "Tool execution cancelled"
    final = bob.get(f"/api/tools/executions/{execution_id}").json()["execution"]
    assert final["status"] == "cancelled" and final["reason"] == "cancelled by bob"
    assert execution_id not in [e["id"] for e in bob.get("/api/tools/executions/active").json()["executions"]]
    assert_error(bob.post(f"/api/tools/executions/{execution_id}/cancel"), 400, "BAD_REQUEST", "not running")


def test_admin_cancels_another_users_execution(as_user: dict[str, httpx.Client]) -> None:
    bob, ann = as_user["bob"], as_user["ann"]
    accepted = execute(bob, "probe/sleep", {"seconds": 60}, **{"async": True})
    execution_id = accepted.json()["executionId"]
    response = ann.post(f"/api/tools/executions/{execution_id}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert wait_status(bob, execution_id, "cancelled")["reason"] == "cancelled by ann"


def test_scoped_admin_key_acts_only_within_its_categories(as_user: dict[str, httpx.Client]) -> None:
    bob, ann, memadmin = as_user["bob"], as_user["ann"], as_user["memadmin"]
    echoed = execute(bob, "probe/echo", {"text": "in scope"})
    assert echoed.status_code == 200, echoed.text
    accepted = execute(bob, "probe/sleep", {"seconds": 60}, timeout=120_000, **{"async": True})
    assert accepted.status_code == 202, accepted.text
    execution_id = accepted.json()["executionId"]
    sleeping = wait_status(bob, execution_id, "running")
    assert sleeping["category"] != "memory"

    # Outside its scopes: not found, for every verb, though the key's user is an admin.
    assert_error(memadmin.get(f"/api/tools/executions/{execution_id}"), 404, "NOT_FOUND")
    assert_error(memadmin.post(f"/api/tools/executions/{execution_id}/cancel"), 404, "NOT_FOUND")
    assert_error(memadmin.get("/api/tools/probe/sleep"), 404, "NOT_FOUND", "scopes")
    assert_error(memadmin.get("/api/tools/metrics", params={"toolName": "probe/sleep"}), 404, "NOT_FOUND")
    active = memadmin.get("/api/tools/executions/active").json()["executions"]
    assert active == [] or {e["category"] for e in active} == {"memory"}
    history = memadmin.get("/api/tools/history", params={"allUsers": "true", "limit": 100}).json()
    assert history["executions"] and {e["category"] for e in history["executions"]} == {"memory"}
    assert history["stats"]["total"] == history["totalCount"] and history["stats"]["running"] == 0
    assert bob.get(f"/api/tools/executions/{execution_id}").json()["execution"]["status"] == "running"

    # Inside them it is still an admin: another user's memory execution and tool are visible.
    echo_id = echoed.json()["executionId"]
    assert memadmin.get(f"/api/tools/executions/{echo_id}").json()["execution"]["userId"] == "bob"
    assert memadmin.get("/api/tools/probe/echo").status_code == 200

    # An unscoped admin key is unchanged: it sees and cancels the execution.
    assert ann.get(f"/api/tools/executions/{execution_id}").json()["execution"]["userId"] == "bob"
    ann_history = ann.get("/api/tools/history", params={"allUsers": "true", "limit": 100}).json()["executions"]
    assert execution_id in [e["id"] for e in ann_history]
    response = ann.post(f"/api/tools/executions/{execution_id}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled", response.text


def test_async_refusals_answer_at_once(as_user: dict[str, httpx.Client]) -> None:
    response = execute(as_user["bob"], "probe/add", {"a": 1, "b": 1}, **{"async": True})
    assert_error(response, 403, "FORBIDDEN", "probe/add")
    assert_error(execute(as_user["bob"], "probe/echo", {"text": 1}, **{"async": True}), 400, "BAD_REQUEST")


def test_unknown_execution_is_404(as_user: dict[str, httpx.Client]) -> None:
    assert_error(as_user["bob"].get("/api/tools/executions/exec_1_nothing"), 404, "NOT_FOUND", "exec_1_nothing")
    assert_error(as_user["ann"].post("/api/tools/executions/exec_1_nothing/cancel"), 404, "NOT_FOUND")


# -- history, metrics ----------------------------------------------------------------------------


def test_history_filters_paging_and_stats(as_user: dict[str, httpx.Client]) -> None:
    hist, ann = as_user["hist"], as_user["ann"]
    before = datetime.now(UTC) - timedelta(seconds=1)
    for i in range(3):
        assert execute(hist, "probe/echo", {"text": str(i)}).status_code == 200
    for i in range(2):
        assert execute(hist, "probe/add", {"a": i, "b": 1}).status_code == 200
    assert execute(hist, "probe/fail").status_code == 500
    assert execute(hist, "probe/query", {"sql": "x"}).status_code == 403

    page = hist.get("/api/tools/history").json()
    assert page["success"] is True and page["totalCount"] == 7 and page["limit"] == 50 and page["offset"] == 0
    assert page["stats"]["total"] == 7 and page["stats"]["success"] == 5 and page["stats"]["failed"] == 2
    assert page["stats"]["averageExecutionTimeMs"] == page["stats"]["averageExecutionTime"] > 0
    started = [e["startTime"] for e in page["executions"]]
    assert started == sorted(started, reverse=True)

    adds = hist.get("/api/tools/history", params={"toolName": "probe/add"}).json()
    assert adds["totalCount"] == 2 and {e["toolName"] for e in adds["executions"]} == {"probe/add"}
    assert hist.get("/api/tools/history", params={"status": "failed"}).json()["totalCount"] == 2
    assert hist.get("/api/tools/history", params={"category": "memory"}).json()["totalCount"] == 3
    first = hist.get("/api/tools/history", params={"limit": 4}).json()
    second = hist.get("/api/tools/history", params={"limit": 4, "offset": 4}).json()
    assert len(first["executions"]) == 4 and len(second["executions"]) == 3 and second["totalCount"] == 7
    assert not {e["id"] for e in first["executions"]} & {e["id"] for e in second["executions"]}
    window = {"startDate": before.isoformat(), "endDate": (datetime.now(UTC) + timedelta(minutes=1)).isoformat()}
    assert hist.get("/api/tools/history", params=window).json()["totalCount"] == 7
    future = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")
    assert hist.get("/api/tools/history", params={"startDate": future}).json()["totalCount"] == 0

    assert_error(hist.get("/api/tools/history", params={"allUsers": "true"}), 403, "FORBIDDEN", "admins")
    assert_error(hist.get("/api/tools/history", params={"userId": "bob"}), 403, "FORBIDDEN")
    everyone = ann.get("/api/tools/history", params={"allUsers": "true", "limit": 100}).json()
    assert {"hist", "bob"} <= {e["userId"] for e in everyone["executions"]}
    only_hist = ann.get("/api/tools/history", params={"userId": "hist"}).json()
    assert only_hist["totalCount"] == 7


def test_metrics(as_user: dict[str, httpx.Client]) -> None:
    adv = as_user["adv"]
    for _ in range(2):
        assert execute(adv, "probe/make-number", {"value": 1}).status_code == 200
    metrics = adv.get("/api/tools/metrics").json()
    assert metrics["success"] is True and metrics["registryMetrics"] == {"totalTools": 10}
    assert metrics["userStats"]["user"] == "adv" and metrics["userStats"]["successfulExecutions"] >= 2
    assert metrics["toolUsageStats"]["probe/make-number"] >= 2 and metrics["categoryStats"]["memory"] >= 2
    assert {"tool": "probe/make-number", "count": metrics["toolUsageStats"]["probe/make-number"]} in metrics[
        "mostUsedTools"
    ]
    assert [u["user"] for u in metrics["users"]] == ["adv"]  # not an admin: only its own line
    one = adv.get("/api/tools/metrics", params={"toolName": "probe/make-number"}).json()
    assert one["registryMetrics"]["tool"] == "probe/make-number" and one["registryMetrics"]["totalInvocations"] >= 2
    assert isinstance(one["activeExecutions"], int)


# -- rate limit ----------------------------------------------------------------------------------


def test_rate_limit_429_with_headers(as_user: dict[str, httpx.Client]) -> None:
    limited = as_user["limited"]
    time.sleep(seconds_to_a_fresh_minute(5.0))  # the burst inside one rate window
    responses = [execute(limited, "probe/echo", {"text": str(i)}) for i in range(RATE_LIMIT + 2)]
    codes = [r.status_code for r in responses]
    assert codes[:RATE_LIMIT] == [200] * RATE_LIMIT and codes[RATE_LIMIT:] == [429, 429], codes
    remaining = [int(r.headers["X-RateLimit-Remaining"]) for r in responses[:RATE_LIMIT]]
    assert remaining == list(range(RATE_LIMIT - 1, -1, -1))
    refused = responses[RATE_LIMIT]
    assert_error(refused, 429, "TOO_MANY_REQUESTS", "limited", f"{RATE_LIMIT} calls per minute")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["X-RateLimit-Limit"] == str(RATE_LIMIT) and refused.headers["X-RateLimit-Remaining"] == "0"
    assert 0 <= int(refused.headers["X-RateLimit-Reset"]) <= 60
    history = limited.get("/api/tools/history", params={"status": "failed"}).json()
    assert all(e["denial"] == "rate_limited" for e in history["executions"]) and history["totalCount"] >= 2
