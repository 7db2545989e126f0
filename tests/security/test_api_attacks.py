"""Attacks over the live HTTP API: a YAML bomb in PUT /api/agents is a 400 and is never stored; an
admin key scoped to one category reaches nothing of another category's executions and tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _support.api_harness import LiveServer, User, agent_body, live_server, probe_servers, provision

from .yaml_attacks import YAML_BOMBS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, User]]:
    work = tmp_path_factory.mktemp("api_attacks")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(
        db,
        [("bob", "execute_basic", "enterprise"), ("memadmin", "admin", "enterprise")],
        scopes={"memadmin": ["agent:execute:memory"]},
    )
    with live_server(work, probe_servers(), db=db) as server:
        server.users = users  # type: ignore[attr-defined]
        yield server, users["bob"]


#: What an admin key scoped to `agent:execute:memory` tries against another user's running
#: execution of another category (`{id}`) and that category's tool: every one answers 404.
OUT_OF_SCOPE = [
    ("GET", "/api/tools/executions/{id}"),
    ("POST", "/api/tools/executions/{id}/cancel"),
    ("GET", "/api/tools/probe/sleep"),
    ("GET", "/api/tools/metrics?toolName=probe/sleep"),
    ("POST", "/trpc/tools.cancelToolExecution"),
    ("GET", "/trpc/tools.getToolStatus?input=%7B%22executionId%22%3A%22{id}%22%7D"),
]


@pytest.mark.parametrize(("name", "document", "needle"), YAML_BOMBS, ids=[b[0] for b in YAML_BOMBS])
def test_put_agent_refuses_a_yaml_bomb(api: tuple[LiveServer, User], name: str, document: str, needle: str) -> None:
    server, bob = api
    body = {**agent_body({}), "yaml": document}
    with server.client(bob) as client:
        response = client.put("/api/agents/demo/bomb", json=body)
        assert response.status_code == 400, response.text
        assert needle in response.text
        assert client.get("/api/agents/demo/bomb").status_code == 404
        listed = client.get("/api/agents")
        assert listed.status_code == 200
        assert "bomb" not in [a.get("slug") for a in listed.json().get("agents", [])]


def test_a_scoped_admin_key_reaches_nothing_outside_its_categories(api: tuple[LiveServer, User]) -> None:
    server, bob = api
    with server.client(bob) as owner, server.client(server.users["memadmin"]) as scoped:  # type: ignore[attr-defined]
        accepted = owner.post(
            "/api/tools/execute",
            json={"name": "probe/sleep", "arguments": {"seconds": 60}, "timeout": 120_000, "async": True},
        )
        assert accepted.status_code == 202, accepted.text
        execution_id = accepted.json()["executionId"]
        try:
            for method, path in OUT_OF_SCOPE:
                body = {"executionId": execution_id} if method == "POST" and path.startswith("/trpc") else None
                response = scoped.request(method, path.format(id=execution_id), json=body)
                assert response.status_code == 404, (method, path, response.text)
            listed = scoped.get("/api/tools/executions/active").json()["executions"]
            assert execution_id not in [e["id"] for e in listed]
            history = scoped.get("/api/tools/history", params={"allUsers": "true"}).json()["executions"]
            assert execution_id not in [e["id"] for e in history]
            # Nothing reached it: it is still running, with no cancellation asked for.
            execution = owner.get(f"/api/tools/executions/{execution_id}").json()["execution"]
            assert execution["status"] == "running" and execution["cancelRequestedBy"] is None
        finally:
            owner.post(f"/api/tools/executions/{execution_id}/cancel")
