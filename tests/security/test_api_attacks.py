"""Attacks over the live HTTP API: a YAML bomb in PUT /api/agents is a 400 and is never stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api_harness import LiveServer, User, agent_body, live_server, probe_servers, provision

from .yaml_attacks import YAML_BOMBS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, User]]:
    work = tmp_path_factory.mktemp("api_attacks")
    db = f"sqlite+aiosqlite:///{work / 'api.db'}"
    users = provision(db, [("bob", "execute_basic", "enterprise")])
    with live_server(work, probe_servers(), db=db) as server:
        yield server, users["bob"]


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
