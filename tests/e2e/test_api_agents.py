"""Agents admin, BUILD runs (sync and async), run events, cancellation, deliverables and per-user
isolation over a live server with the probe MCP server."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _support.api_harness import (  # noqa: F401  (fixtures)
    LiveServer,
    User,
    agent_body,
    as_user,
    live_server,
    probe_servers,
    provision,
    read_events,
    read_sse,
    server,
    users,
)

pytestmark = pytest.mark.timeout(120)

USERS = [
    ("ann", "admin", "enterprise"),
    ("adv", "execute_advanced", "enterprise"),
    ("bob", "execute_basic", "enterprise"),
    ("carol", "execute_basic", "enterprise"),
    ("viewer", "view_only", "enterprise"),
    ("memadmin", "admin", "enterprise"),
]
ENGINE_CONFIG = {"plans": {"enterprise": {"rate_per_minute": 100_000}}, "cancel_poll_ms": 50}


def definition(
    name: str, tools: list[str], params: dict[str, dict[str, Any]] | None = None, **configuration: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "displayName": name.title(), "version": "1.0.0", "type": "tool"},
        "configuration": {"tools": tools, "toolParams": params or {}, **configuration},
    }


CHAIN = definition(
    "chain",
    ["probe/echo", "probe/make-number", "probe/double"],
    {"probe/echo": {"text": "{{payload.text}}"}, "probe/make-number": {"value": 21}},
)
RISKY = definition(
    "risky",
    ["probe/echo", "probe/query"],
    {"probe/echo": {"text": "before the query"}, "probe/query": {"sql": "select 1"}},
)
SLEEPER = definition(
    "sleeper",
    ["probe/sleep", "probe/echo"],
    {"probe/sleep": {"seconds": "{{payload.seconds}}"}, "probe/echo": {"text": "after the sleep"}},
    stopOnError=False,
)


@pytest.fixture(scope="module")
def users_and_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, User], LiveServer]]:
    work = tmp_path_factory.mktemp("api_agents")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(db, USERS, scopes={"memadmin": ["agent:execute:memory"]})
    with live_server(work, probe_servers(), engine_config=ENGINE_CONFIG, db=db) as server:
        with server.client(users["bob"]) as bob:
            for slug, defn in (("chain", CHAIN), ("risky", RISKY), ("sleeper", SLEEPER)):
                response = bob.put(f"/api/agents/demo/{slug}", json=agent_body(defn))
                assert response.status_code == 200, response.text
        yield users, server


def assert_error(response: httpx.Response, status: int, code: str, *needles: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"]["code"] == code, body
    for needle in needles:
        assert needle in body["error"]["message"], body["error"]["message"]
    assert "Traceback" not in response.text
    return body


def fields(body: dict[str, Any]) -> set[str]:
    return {d["field"] for d in body["error"]["details"]}


def build(client: httpx.Client, slug: str, **body: Any) -> httpx.Response:
    return client.post(f"/api/agents/demo/{slug}/build", json=body)


def steps(run: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["tool"], s["status"]) for s in run["steps"]]


# -- authentication ----------------------------------------------------------------------------


def test_every_route_needs_a_valid_key(server: LiveServer) -> None:
    routes = [
        ("GET", "/api/agents"),
        ("GET", "/api/agents/demo/chain"),
        ("PUT", "/api/agents/demo/chain"),
        ("DELETE", "/api/agents/demo/chain"),
        ("POST", "/api/agents/demo/chain/build"),
        ("GET", "/api/runs/run_1_x"),
        ("POST", "/api/runs/run_1_x/cancel"),
        ("GET", "/api/runs/run_1_x/events"),
        ("GET", "/api/deliverables/dlv_1_x"),
        ("GET", "/api/orgs"),
        ("GET", "/api/orgs/demo/members"),
        ("PUT", "/api/orgs/demo/members/bob"),
        ("DELETE", "/api/orgs/demo/members/bob"),
    ]
    with httpx.Client(base_url=server.url) as anonymous:
        assert anonymous.get("/health").json()["status"] == "ok"
        assert anonymous.get("/ready").status_code == 200
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer ta_wrong"}, {"X-API-Key": "nope"}):
                assert_error(anonymous.request(method, path, json={}, headers=headers), 401, "UNAUTHORIZED")
        assert anonymous.get("/api/agents/demo/chain").json()["error"]["message"].startswith("A valid API key")


def test_x_api_key_header(server: LiveServer, users: dict[str, User]) -> None:
    with httpx.Client(base_url=server.url, headers={"X-API-Key": users["viewer"].key}) as client:
        assert client.get("/api/agents").json()["success"] is True


# -- agents ------------------------------------------------------------------------------------


def test_list_and_get_agents(as_user: dict[str, httpx.Client]) -> None:
    viewer = as_user["viewer"]
    listed = viewer.get("/api/agents").json()
    assert listed["success"] is True
    by_slug = {a["slug"]: a for a in listed["agents"]}
    assert {"chain", "risky", "sleeper"} <= set(by_slug) and listed["totalCount"] == len(listed["agents"])
    chain = by_slug["chain"]
    assert chain["organization_slug"] == "demo" and chain["valid"] is True
    assert chain["tools"] == ["probe/echo", "probe/make-number", "probe/double"]
    nothing = viewer.get("/api/agents", params={"org": "elsewhere"}).json()
    assert nothing == {"success": True, "agents": [], "totalCount": 0}

    got = viewer.get("/api/agents/demo/chain").json()
    assert got["agent"]["display_name"] == "chain" and json.loads(got["agent"]["yaml"]) == CHAIN
    config = got["definition"]["configuration"]
    assert config["toolExecutionMode"] == "sequential" and config["stopOnError"] is True  # defaults filled in
    assert_error(viewer.get("/api/agents/demo/nothing"), 404, "NOT_FOUND", "demo/nothing")


def test_put_inserts_updates_and_accepts_a_seed_record(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    defn = definition("upserted", ["probe/echo"], {"probe/echo": {"text": "v1"}})
    first = bob.put("/api/agents/team/upserted", json=agent_body(defn, description="first"))
    assert first.status_code == 200 and first.json()["outcome"] == "inserted"
    assert first.json()["agent"]["created_at"] is not None
    again = bob.put("/api/agents/team/upserted", json=agent_body(defn, description="first"))
    assert again.json()["outcome"] == "unchanged"
    changed = bob.put("/api/agents/team/upserted", json=agent_body(defn, description="second", version="1.0.1"))
    assert changed.json()["outcome"] == "updated" and changed.json()["agent"]["description"] == "second"
    # A seed record, keys included, as it is.
    seed = {
        "organization_slug": "team",
        "slug": "seeded",
        **agent_body(defn),
        "context": {"supported_modes": ["build"]},
    }
    seeded = bob.put("/api/agents/team/seeded", json=seed)
    assert seeded.status_code == 200 and seeded.json()["outcome"] == "inserted", seeded.text
    team = bob.get("/api/agents", params={"org": "team"}).json()["agents"]
    assert [a["slug"] for a in team] == ["seeded", "upserted"]


@pytest.mark.parametrize(
    ("body", "expected_fields", "needles"),
    [
        (
            agent_body(definition("x", ["echo"])),
            {"yaml.configuration.tools[0]"},
            ("Tool 'echo' must include namespace: expected 'namespace/tool'",),
        ),
        (
            agent_body({"metadata": {"name": "x"}, "configuration": {"tools": ["probe/echo"], "toolParms": {}}}),
            {"yaml.configuration.toolParms"},
            ("unknown key 'toolParms'", "did you mean 'toolParams'?"),
        ),
        (agent_body(definition("x", [])), {"yaml.configuration.tools"}, ("No tools configured",)),
        (
            agent_body(definition("x", ["probe/echo"], {"probe/echo": {"text": "{{payload.text"}})),
            {"yaml.configuration.toolParams.probe/echo.text"},
            (),
        ),
        (
            agent_body(
                definition("x", ["probe/echo", "nope"], {"probe/echo": {"text": "x"}}, toolExecutionMode="sideways")
            ),
            {"yaml.configuration.tools[1]", "yaml.configuration.toolExecutionMode"},
            (),
        ),
        ({**agent_body(definition("x", ["probe/echo"])), "yaml": "metadata: [unclosed"}, {"yaml"}, ()),
        (
            {k: v for k, v in agent_body(definition("x", ["probe/echo"])).items() if k != "yaml"},
            {"yaml"},
            (),
        ),
        (
            {**agent_body(definition("x", ["probe/echo"])), "mode_profile": "chat_full"},
            {"mode_profile"},
            ("unknown mode profile 'chat_full': use 'tool_full'",),
        ),
        ({**agent_body(definition("x", ["probe/echo"])), "colour": "red"}, {"colour"}, ()),
        ({**agent_body(definition("x", ["probe/echo"])), "slug": "other"}, {"slug"}, ("the path says 'bad'",)),
    ],
)
def test_invalid_put_is_400_naming_each_field(
    as_user: dict[str, httpx.Client], body: dict[str, Any], expected_fields: set[str], needles: tuple[str, ...]
) -> None:
    response = as_user["bob"].put("/api/agents/demo/bad", json=body)
    error = assert_error(response, 400, "BAD_REQUEST", *needles)
    assert fields(error) == expected_fields, error
    for field in expected_fields:
        assert field in error["error"]["message"]
    assert_error(as_user["bob"].get("/api/agents/demo/bad"), 404, "NOT_FOUND")  # nothing was stored


def test_put_takes_the_agent_yaml_itself_with_columns_from_its_metadata(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    text = yaml.safe_dump(
        {
            "metadata": {"name": "from-yaml", "displayName": "From YAML", "version": "2.0.0", "type": "tool"},
            "configuration": {"tools": ["probe/echo"], "toolParams": {"probe/echo": {"text": "hi"}}},
        }
    )
    put = bob.put("/api/agents/team/from-yaml", content=text, headers={"Content-Type": "application/yaml"})
    assert put.status_code == 200 and put.json()["outcome"] == "inserted", put.text
    agent = bob.get("/api/agents/team/from-yaml").json()["agent"]
    assert {k: agent[k] for k in ("display_name", "agent_type", "mode_profile", "status", "version", "yaml")} == {
        "display_name": "From YAML",
        "agent_type": "tool",
        "mode_profile": "tool_full",
        "status": "active",
        "version": "2.0.0",
        "yaml": text,
    }
    # The same text again changes nothing; a JSON body of just the text is the same record.
    again = bob.put("/api/agents/team/from-yaml", json={"yaml": text})
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged", again.text
    # A bad definition sent as YAML is a 400 naming its field, as in the JSON form.
    bad = bob.put(
        "/api/agents/team/bad-yaml",
        content="metadata: {name: b}\nconfiguration: {tools: [echo]}\n",
        headers={"Content-Type": "text/yaml; charset=utf-8"},
    )
    error = assert_error(bad, 400, "BAD_REQUEST", "Tool 'echo' must include namespace")
    assert fields(error) == {"yaml.configuration.tools[0]"}
    binary = bob.put("/api/agents/team/bin", content=b"\xff\xfe", headers={"Content-Type": "application/yaml"})
    assert_error(binary, 400, "BAD_REQUEST", "not UTF-8")


def test_put_needs_more_than_view_only(as_user: dict[str, httpx.Client]) -> None:
    response = as_user["viewer"].put("/api/agents/demo/viewed", json=agent_body(definition("v", ["probe/echo"])))
    assert_error(response, 403, "FORBIDDEN", "viewer", "view_only")


def test_delete_needs_the_orgs_editor_role(as_user: dict[str, httpx.Client]) -> None:
    # bob started `demo` with its first agent (the module's fixture), so he is its admin.
    bob, carol, adv, ann = as_user["bob"], as_user["carol"], as_user["adv"], as_user["ann"]
    assert bob.put("/api/agents/demo/doomed", json=agent_body(definition("doomed", ["probe/echo"]))).status_code == 200
    assert_error(
        carol.delete("/api/agents/demo/doomed"),
        403,
        "FORBIDDEN",
        "carol",
        "editor role",
        "'demo'",
        "toolagent orgs grant demo carol --role editor",
    )
    assert_error(adv.delete("/api/agents/demo/doomed"), 403, "FORBIDDEN", "adv")
    assert bob.get("/api/agents/demo/doomed").status_code == 200
    granted = bob.put("/api/orgs/demo/members/carol", json={"role": "editor"})
    assert granted.status_code == 200 and granted.json()["outcome"] == "granted", granted.text
    try:
        assert carol.delete("/api/agents/demo/doomed").json() == {"success": True, "deleted": "demo/doomed"}
    finally:
        assert bob.delete("/api/orgs/demo/members/carol").status_code == 200
    assert_error(bob.get("/api/agents/demo/doomed"), 404, "NOT_FOUND")
    assert_error(ann.delete("/api/agents/demo/doomed"), 404, "NOT_FOUND", "demo/doomed")
    # A global admin deletes in any organization.
    assert bob.put("/api/agents/demo/doomed", json=agent_body(definition("doomed", ["probe/echo"]))).status_code == 200
    assert ann.delete("/api/agents/demo/doomed").status_code == 200


# -- BUILD -------------------------------------------------------------------------------------


def test_sync_build_answers_with_the_run_and_its_deliverable(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    response = build(bob, "chain", payload={"text": "hello"}, metadata={"ticket": "T-1"})
    assert response.status_code == 200, response.text
    body = response.json()
    run, deliverable = body["run"], body["deliverable"]
    assert body["success"] is True and run["status"] == "success" and run["user"] == "bob"
    assert run["agent"] == "demo/chain" and run["executionMode"] == "sequential" and run["endedAt"] is not None
    assert steps(run) == [("probe/echo", "success"), ("probe/make-number", "success"), ("probe/double", "success")]
    echo, number, doubled = run["steps"]
    assert echo["result"]["structuredContent"] == {"text": "hello", "length": 5}
    assert doubled["params"] == {"value": 21} and doubled["paramSources"]["value"] != "params"  # chained
    assert doubled["result"]["structuredContent"]["value"] == 42

    assert deliverable["id"] == run["deliverableId"] and deliverable["runId"] == run["id"]
    assert deliverable["format"] == "json" and deliverable["type"] == "tool-result"
    meta = deliverable["metadata"]
    assert (meta["toolsExecuted"], meta["successfulTools"], meta["failedTools"]) == (3, 3, 0)
    assert meta["toolsUsed"] == ["probe/echo", "probe/make-number", "probe/double"] and meta["stopOnError"] is True
    assert json.loads(deliverable["content"])["metadata"]["runId"] == run["id"]

    assert bob.get(f"/api/runs/{run['id']}").json()["run"] == run
    assert bob.get(f"/api/deliverables/{deliverable['id']}").json()["deliverable"] == deliverable
    assert bob.get(f"/api/deliverables/{run['id']}").json()["deliverable"]["id"] == deliverable["id"]  # by run id
    # Every step went through the engine as bob: it is in his tool history with the run id.
    history = bob.get("/api/tools/history", params={"limit": 100}).json()["executions"]
    in_run = {e["toolName"] for e in history if e.get("runId") == run["id"]}
    assert in_run == {"probe/echo", "probe/make-number", "probe/double"}


def test_build_overrides_and_format(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    body = build(
        bob,
        "chain",
        payload={"text": "ignored"},
        tools=["probe/echo", "probe/fail", "probe/double"],
        toolParams={"probe/echo": {"text": "overridden"}, "probe/double": {"value": 2}},
        toolExecutionMode="parallel",
        stopOnError=False,
        format="markdown",
    ).json()
    run = body["run"]
    assert body["success"] is False and run["status"] == "failed" and run["executionMode"] == "parallel"
    assert run["overrides"]["toolExecutionMode"] == "parallel" and run["stopOnError"] is False
    assert dict(steps(run)) == {"probe/echo": "success", "probe/fail": "failed", "probe/double": "success"}
    assert run["steps"][0]["result"]["structuredContent"]["text"] == "overridden"
    assert "deliberate failure" in run["steps"][1]["error"]
    assert body["deliverable"]["format"] == "markdown" and body["deliverable"]["content"].startswith("#")

    stopped = build(
        bob,
        "chain",
        payload={"text": "x"},
        tools=["probe/fail", "probe/echo"],
        toolParams={"probe/echo": {"text": "never"}},
    ).json()["run"]
    assert steps(stopped) == [("probe/fail", "failed"), ("probe/echo", "skipped")]


@pytest.mark.parametrize(
    ("body", "expected_fields"),
    [
        ({"tools": ["probe/echo", "echo"]}, {"tools[1]"}),
        ({"tools": []}, {"tools"}),
        ({"toolExecutionMode": "sideways"}, {"toolExecutionMode"}),
        ({"stopOnError": "sometimes"}, {"stopOnError"}),
        ({"format": "pdf", "tool": ["probe/echo"]}, {"format", "tool"}),
        ({"payload": []}, {"payload"}),
        ({"toolParams": {"probe/echo": {"text": "{{payload.x"}}}, {"toolParams.probe/echo.text"}),
    ],
)
def test_invalid_build_body_is_400_naming_each_field(
    as_user: dict[str, httpx.Client], body: dict[str, Any], expected_fields: set[str]
) -> None:
    error = assert_error(build(as_user["bob"], "chain", **body), 400, "BAD_REQUEST")
    assert fields(error) == expected_fields, error


def test_an_unknown_body_field_is_answered_with_the_field_it_is_closest_to(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    error = assert_error(build(bob, "chain", toolparams={}), 400, "BAD_REQUEST")
    assert error["error"]["details"] == [
        {"field": "toolparams", "message": "Extra inputs are not permitted; did you mean 'toolParams'?"}
    ]
    body = agent_body(definition("typo", ["probe/echo"]))
    body["description_"] = body.pop("display_name")
    error = assert_error(bob.put("/api/agents/demo/typo", json=body), 400, "BAD_REQUEST", "did you mean 'description'?")
    # Nothing close: no guess.
    error = assert_error(build(bob, "chain", zzzz=1), 400, "BAD_REQUEST")
    assert error["error"]["details"] == [{"field": "zzzz", "message": "Extra inputs are not permitted"}]


def test_build_of_an_unknown_agent_is_404(as_user: dict[str, httpx.Client]) -> None:
    assert_error(build(as_user["bob"], "nothing"), 404, "NOT_FOUND", "demo/nothing")


@pytest.mark.parametrize(("user", "allowed"), [("bob", False), ("adv", False), ("ann", True)])
def test_build_steps_pass_the_engine_gate_as_the_caller(
    as_user: dict[str, httpx.Client], user: str, allowed: bool
) -> None:
    level = {"bob": "execute_basic", "adv": "execute_advanced", "ann": "admin"}[user]
    response = build(as_user[user], "risky")
    assert response.status_code == 200, response.text
    body = response.json()
    run = body["run"]
    if allowed:
        assert body["success"] is True and steps(run) == [("probe/echo", "success"), ("probe/query", "success")]
        return
    assert body["success"] is False and run["status"] == "failed"
    assert steps(run) == [("probe/echo", "success"), ("probe/query", "denied")]
    error = run["steps"][1]["error"]
    for needle in (f"user '{user}'", level, "probe/query", "risk dangerous", "requires admin"):
        assert needle in error, error
    assert body["deliverable"]["metadata"]["failedTools"] == 1
    denied = as_user[user].get("/api/tools/history", params={"toolName": "probe/query", "status": "failed"}).json()
    assert any(e.get("runId") == run["id"] and e["denial"] == "level" for e in denied["executions"]), denied


# -- async BUILD, events, cancellation ---------------------------------------------------------


def test_async_build_streams_step_events_until_run_finished(as_user: dict[str, httpx.Client]) -> None:
    bob = as_user["bob"]
    accepted = build(bob, "sleeper", payload={"seconds": 0.3}, **{"async": True})
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    run_id = body["runId"]
    assert body["success"] is True and body["status"] == "running" and run_id.startswith("run_")
    assert body["links"] == {
        "run": f"/api/runs/{run_id}",
        "events": f"/api/runs/{run_id}/events",
        "cancel": f"/api/runs/{run_id}/cancel",
    }
    assert bob.get(f"/api/runs/{run_id}").json()["run"]["id"] == run_id  # recorded before the 202

    live = read_sse(bob, run_id)
    events = [e for _, e in live]
    assert [(e["type"], (e.get("step") or {}).get("tool"), (e.get("step") or {}).get("status")) for e in events] == [
        ("run_started", None, None),
        ("step_started", "probe/sleep", "running"),
        ("step_finished", "probe/sleep", "success"),
        ("step_started", "probe/echo", "running"),
        ("step_finished", "probe/echo", "success"),
        ("run_finished", None, None),
    ]
    assert [i for i, _ in live] == ["1", "2", "3", "4", "5", "6"]
    assert all(e["runId"] == run_id for e in events) and events[-1]["status"] == "success"
    assert events[2]["step"]["durationMs"] >= 300 and events[2]["step"]["position"] == 0

    run = bob.get(f"/api/runs/{run_id}").json()["run"]
    assert run["status"] == "success" and steps(run) == [("probe/sleep", "success"), ("probe/echo", "success")]
    assert events[-1] == {
        "type": "run_finished",
        "runId": run_id,
        "status": "success",
        "deliverableId": run["deliverableId"],
        "error": None,
    }
    assert bob.get(f"/api/deliverables/{run['deliverableId']}").json()["deliverable"]["metadata"]["status"] == "success"
    # A subscriber after the end gets the same events with the same ids, from the store.
    assert read_sse(bob, run_id) == live
    # Resuming after an id gets what follows it only; after the last one, 204 (an EventSource stops).
    assert read_sse(bob, run_id, last_event_id="3") == live[3:]
    done = bob.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "6"})
    assert done.status_code == 204 and done.content == b""
    assert_error(bob.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"}), 400, "BAD_REQUEST")


def test_a_resumed_stream_of_a_live_run_continues_after_its_last_event_id(
    server: LiveServer, users: dict[str, User]
) -> None:
    with server.client(users["bob"]) as bob, server.client(users["bob"]) as follower:
        run_id, _, first, thread = _start_sleeper(follower)
        # While the sleep step runs: the stream so far, then a reconnect after its second event.
        with bob.stream("GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "1"}) as response:
            lines = response.iter_lines()
            record = [next(lines) for _ in range(3)]
        assert record[0] == "id: 2" and record[1] == "event: step_started", record
        assert json.loads(record[2].partition(":")[2])["step"]["tool"] == "probe/sleep"
        assert bob.post(f"/api/runs/{run_id}/cancel").json()["status"] == "cancelled"
        thread.join(30)
        resumed = read_sse(bob, run_id, last_event_id="2")
    assert [i for i, _ in resumed] == [str(i) for i in range(3, 3 + len(resumed))]
    assert (resumed[0][1]["type"], resumed[0][1]["step"]["tool"]) == ("step_finished", "probe/sleep")
    assert resumed[-1][1]["type"] == "run_finished" and resumed[-1][1]["status"] == "cancelled"
    assert [e for _, e in resumed] == first[2:]  # the live stream's events 3.. are the same


def _start_sleeper(client: httpx.Client) -> tuple[str, threading.Event, list[dict[str, Any]], threading.Thread]:
    """An async run of `sleeper` (60 s sleep, then echo) and a thread reading its events; the event is
    set once the sleep step has started."""
    accepted = build(client, "sleeper", payload={"seconds": 60}, **{"async": True})
    assert accepted.status_code == 202, accepted.text
    run_id = accepted.json()["runId"]
    sleeping, events = threading.Event(), []

    def follow() -> None:
        def seen(event: dict[str, Any]) -> None:
            if event["type"] == "step_started" and event["step"]["tool"] == "probe/sleep":
                sleeping.set()

        events.extend(read_events(client, run_id, on_event=seen, timeout_s=90))

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    assert sleeping.wait(30), "the sleep step did not start"
    return run_id, sleeping, events, thread


def test_cancel_a_running_build(server: LiveServer, users: dict[str, User]) -> None:
    with server.client(users["bob"]) as bob, server.client(users["bob"]) as follower:
        run_id, _, events, thread = _start_sleeper(follower)
        response = bob.post(f"/api/runs/{run_id}/cancel")
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["success"] is True and body["status"] == "cancelled" and body["message"] == "run cancelled"
        run = body["run"]
        assert run["status"] == "cancelled" and run["endedAt"] is not None
        assert run["error"].startswith("run cancelled") and "cancelled by bob" in run["error"]
        assert steps(run) == [("probe/sleep", "cancelled"), ("probe/echo", "cancelled")]
        sleep, echo = run["steps"]
        assert "cancelled by bob" in sleep["error"] and sleep["durationMs"] < 30_000
        assert f"run {run_id} was cancelled by bob" in echo["error"] and echo["result"] is None  # never called
        thread.join(30)
        assert not thread.is_alive()
        assert events[-1] == {
            "type": "run_finished",
            "runId": run_id,
            "status": "cancelled",
            "deliverableId": run["deliverableId"],
            "error": run["error"],
        }
        seen = [(e["type"], e["step"]["tool"], e["step"]["status"]) for e in events if "step" in e]
        assert ("step_finished", "probe/sleep", "cancelled") in seen
        assert seen[-1] == ("step_finished", "probe/echo", "cancelled")

        assert bob.get(f"/api/runs/{run_id}").json()["run"]["status"] == "cancelled"
        deliverable = bob.get(f"/api/deliverables/{run_id}").json()["deliverable"]
        assert deliverable["metadata"]["status"] == "cancelled"
        history = bob.get("/api/tools/history", params={"toolName": "probe/sleep", "limit": 100}).json()["executions"]
        sleep_call = [e for e in history if e.get("runId") == run_id]
        assert [e["status"] for e in sleep_call] == ["cancelled"]
        assert_error(bob.post(f"/api/runs/{run_id}/cancel"), 400, "BAD_REQUEST", "not running", "cancelled")


def test_runs_and_deliverables_are_private_to_their_user(
    server: LiveServer, users: dict[str, User], as_user: dict[str, httpx.Client]
) -> None:
    carol, ann = as_user["carol"], as_user["ann"]
    with server.client(users["bob"]) as bob, server.client(users["bob"]) as follower:
        done = build(bob, "chain", payload={"text": "mine"}).json()
        run_id, deliverable_id = done["run"]["id"], done["deliverable"]["id"]
        for path in (
            f"/api/runs/{run_id}",
            f"/api/runs/{run_id}/events",
            f"/api/deliverables/{deliverable_id}",
            f"/api/deliverables/{run_id}",
        ):
            assert_error(carol.get(path), 404, "NOT_FOUND", "not found")  # as if it did not exist
            assert ann.get(path).status_code == 200
        assert ann.get(f"/api/runs/{run_id}").json()["run"]["user"] == "bob"
        assert ann.get(f"/api/deliverables/{deliverable_id}").json()["deliverable"]["runId"] == run_id

        # A running one: carol can neither see nor cancel it; the admin can do both.
        running, _, events, thread = _start_sleeper(follower)
        assert_error(carol.post(f"/api/runs/{running}/cancel"), 404, "NOT_FOUND")
        assert_error(carol.get(f"/api/runs/{running}"), 404, "NOT_FOUND")
        assert bob.get(f"/api/runs/{running}").json()["run"]["status"] == "running"
        assert ann.get(f"/api/runs/{running}").json()["run"]["status"] == "running"
        cancelled = ann.post(f"/api/runs/{running}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
        thread.join(30)
        assert events[-1]["status"] == "cancelled"
        run = bob.get(f"/api/runs/{running}").json()["run"]
        assert run["status"] == "cancelled" and "cancelled by ann" in run["steps"][0]["error"]


def test_a_scoped_admin_key_sees_and_cancels_only_runs_within_its_categories(
    server: LiveServer, users: dict[str, User], as_user: dict[str, httpx.Client]
) -> None:
    memadmin, ann = as_user["memadmin"], as_user["ann"]
    with server.client(users["bob"]) as bob, server.client(users["bob"]) as follower:
        within = build(bob, "chain", payload={"text": "memory only"}).json()["run"]["id"]
        assert memadmin.get(f"/api/runs/{within}").json()["run"]["user"] == "bob"

        # The sleeper calls a tool outside `agent:execute:memory`: its run does not exist for the key.
        running, _, events, thread = _start_sleeper(follower)
        assert_error(memadmin.get(f"/api/runs/{running}"), 404, "NOT_FOUND", "scopes")
        assert_error(memadmin.get(f"/api/runs/{running}/events"), 404, "NOT_FOUND")
        assert_error(memadmin.post(f"/api/runs/{running}/cancel"), 404, "NOT_FOUND")
        assert bob.get(f"/api/runs/{running}").json()["run"]["status"] == "running"
        cancelled = ann.post(f"/api/runs/{running}/cancel")  # an unscoped admin key still can
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
        thread.join(30)
        assert events[-1]["status"] == "cancelled"
        assert "cancelled by ann" in bob.get(f"/api/runs/{running}").json()["run"]["steps"][0]["error"]


def test_unknown_run_and_deliverable_are_404(as_user: dict[str, httpx.Client]) -> None:
    ann = as_user["ann"]
    assert_error(ann.get("/api/runs/run_1_nothing"), 404, "NOT_FOUND", "run_1_nothing")
    assert_error(ann.post("/api/runs/run_1_nothing/cancel"), 404, "NOT_FOUND")
    assert_error(ann.get("/api/runs/run_1_nothing/events"), 404, "NOT_FOUND")
    assert_error(ann.get("/api/deliverables/dlv_1_nothing"), 404, "NOT_FOUND", "dlv_1_nothing")


@contextlib.contextmanager
def cli_build(server: LiveServer) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`toolagent build demo/sleeper` as bob in another process, on the server's store: the process
    and its run id (read from its stderr); killed afterwards if still running."""
    work = server.log.parent
    env = {**os.environ, "TOOLAGENT_ENGINE_CONFIG": str(work / "engine.json"), "TOOLAGENT_USER": "bob"}
    env.pop("TOOLAGENT_DATABASE_URL", None)
    exe = Path(sys.executable).parent / "toolagent"
    cli = subprocess.Popen(
        [
            str(exe),
            "--db",
            server.db,
            "--servers",
            str(work / "mcp.json"),
            "build",
            "demo/sleeper",
            "-p",
            json.dumps({"seconds": 60}),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert cli.stderr is not None
        yield cli, next(m.group(0) for line in cli.stderr if (m := re.search(r"run_\d+_[0-9a-f]+", line)))
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(10)


def follow_until_sleeping(client: httpx.Client, run_id: str) -> tuple[threading.Thread, list[dict[str, Any]]]:
    """Read the run's events on a thread (into the returned list) until its sleep step is seen running."""
    sleeping, events = threading.Event(), []

    def follow() -> None:
        events.extend(
            read_events(
                client,
                run_id,
                timeout_s=90,
                on_event=lambda e: (
                    e["type"] == "step_started" and e["step"]["tool"] == "probe/sleep" and sleeping.set()
                ),
            )
        )

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    assert sleeping.wait(30), "the CLI run's sleep step was not seen"
    return thread, events


def test_events_and_cancel_of_a_run_in_another_process(server: LiveServer, users: dict[str, User]) -> None:
    """A CLI build against the same store: the API follows its steps from the store and stops it."""
    with cli_build(server) as (cli, run_id):
        with (
            server.client(users["bob"]) as bob,
            server.client(users["bob"]) as follower,
            server.client(users["carol"]) as carol,
        ):
            thread, events = follow_until_sleeping(follower, run_id)
            assert_error(carol.post(f"/api/runs/{run_id}/cancel"), 404, "NOT_FOUND")
            response = bob.post(f"/api/runs/{run_id}/cancel")
            assert response.status_code == 200, response.text
            assert response.json()["status"] == "cancelled"
            thread.join(30)
            assert not thread.is_alive()
        assert [(e["type"], e.get("step", {}).get("tool"), e.get("step", {}).get("status")) for e in events] == [
            ("run_started", None, None),
            ("step_started", "probe/sleep", "running"),
            ("step_finished", "probe/sleep", "cancelled"),
            ("step_started", "probe/echo", "running"),  # stopOnError is off: it starts, refused at once
            ("step_finished", "probe/echo", "cancelled"),
            ("run_finished", None, None),
        ]
        assert events[-1]["status"] == "cancelled" and "cancelled by bob" in events[2]["step"]["error"]
        assert cli.wait(30) == 1  # the CLI reports a cancelled run as not successful


def test_events_of_a_run_whose_process_is_killed_end_with_it_interrupted(
    server: LiveServer, users: dict[str, User]
) -> None:
    """The API follows a CLI build from the store; when that process dies, the run is closed and the stream ends."""
    with cli_build(server) as (cli, run_id):
        with server.client(users["bob"]) as bob:
            thread, events = follow_until_sleeping(bob, run_id)
            cli.kill()
            cli.wait(10)
            thread.join(30)
            assert not thread.is_alive(), "the event stream did not end after the run's process died"
            run = bob.get(f"/api/runs/{run_id}").json()["run"]
        error = f"interrupted: process {cli.pid} on {socket.gethostname()} ended before it finished"
        assert (run["status"], run["error"]) == ("failed", error)
        assert [(e["type"], e.get("step", {}).get("tool"), e.get("step", {}).get("status")) for e in events] == [
            ("run_started", None, None),
            ("step_started", "probe/sleep", "running"),
            ("step_finished", "probe/sleep", "failed"),
            ("step_finished", "probe/echo", "skipped"),
            ("run_finished", None, None),
        ]
        assert (events[-1]["status"], events[-1]["error"]) == ("failed", error)


def test_a_killed_cli_build_reads_as_interrupted_at_once(server: LiveServer, users: dict[str, User]) -> None:
    """No event stream follows it: the next read or cancel of the run sees that its process is gone."""
    with cli_build(server) as (cli, run_id), server.client(users["bob"]) as bob:
        cli.kill()
        cli.wait(10)
        run = bob.get(f"/api/runs/{run_id}").json()["run"]
        assert (run["status"], run["error"]) == (
            "failed",
            f"interrupted: process {cli.pid} on {socket.gethostname()} ended before it finished",
        )
        cancel = bob.post(f"/api/runs/{run_id}/cancel")
        assert cancel.status_code == 400 and "not running" in cancel.json()["error"]["message"]
