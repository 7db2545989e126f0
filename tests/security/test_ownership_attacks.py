"""Agent ownership under attack, on SQLite and PostgreSQL, through the API in process: every line
of `ownership_attacks.OWNERSHIP_ATTACKS` is refused, leaves the demo agent and `demo`'s members as
they were, and (for a refused change) leaves a `deny` row in an audit chain that still verifies."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from _support.org_harness import api_clients, audit_rows, audit_verifies, grant, provision

from toolagent.data import seed_files as packaged_seeds
from toolagent.seeding import seed_files
from toolagent.store import open_store

from .ownership_attacks import AGENT, OWNERSHIP_ATTACKS, STRIPPED

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

USERS = [
    ("ann", "admin"),
    ("mallory", "execute_basic"),
    ("eddie", "execute_basic"),
    ("vera", "execute_basic"),
    ("vic", "view_only"),
    ("scoped", "admin"),
]


async def _world(url: str) -> dict[str, str]:
    keys = await provision(url, USERS, scopes={"scoped": ["agent:execute:memory"]})
    async with open_store(url) as store:
        await seed_files(store, packaged_seeds())
    await grant(url, "demo", "eddie", "editor")
    await grant(url, "demo", "vera", "viewer")
    await grant(url, "demo", "vic", "editor")
    return keys


async def _snapshot(client: httpx.AsyncClient) -> tuple[Any, ...]:
    agent = (await client.get(AGENT)).json()["agent"]
    members = (await client.get("/api/orgs/demo/members")).json()["members"]
    agents = [a["slug"] for a in (await client.get("/api/agents", params={"org": "demo"})).json()["agents"]]
    return agent["yaml"], agent["updated_at"], [(m["user"], m["role"]) for m in members], agents


async def test_another_orgs_key_cannot_strip_the_demo_agents_security(db_url: str) -> None:
    # The finding itself: an execute_basic key that belongs to another organization overwrites the
    # seeded demo agent without its security block.
    keys = await provision(db_url, [("mallory", "execute_basic")])
    async with open_store(db_url) as store:
        await seed_files(store, packaged_seeds())
        before = await store.agents.get_agent("demo", "supabase-agent")
    async with api_clients(db_url, keys) as clients:
        mallory = clients["mallory"]
        own = await mallory.put("/api/agents/evil/x", json={**STRIPPED, "display_name": "x"})
        assert own.status_code == 200, own.text  # her own organization: created, she is its admin
        response = await mallory.put(AGENT, json=STRIPPED)
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "FORBIDDEN"
    async with open_store(db_url) as store:
        after = await store.agents.get_agent("demo", "supabase-agent")
    assert after == before
    assert "security" in json.loads(after.yaml)["configuration"]


@pytest.mark.parametrize(
    ("name", "user", "method", "path", "body", "status", "needles"),
    OWNERSHIP_ATTACKS,
    ids=[a[0] for a in OWNERSHIP_ATTACKS],
)
async def test_ownership_attack_is_refused(
    db_url: str, name: str, user: str, method: str, path: str, body: Any, status: int, needles: tuple[str, ...]
) -> None:
    keys = await _world(db_url)
    async with api_clients(db_url, keys) as clients:
        assert (
            await clients["mallory"].put("/api/agents/evil/x", json={**STRIPPED, "display_name": "x"})
        ).status_code == 200
        before = await _snapshot(clients["ann"])
        denials_before = len([r for r in await audit_rows(db_url) if r.decision == "deny"])

        response = await clients[user].request(method, path, json=body)

        assert response.status_code == status, response.text
        error = response.json()["error"]
        for needle in needles:
            assert needle in error["message"], error["message"]
        assert await _snapshot(clients["ann"]) == before
    denials = [r for r in await audit_rows(db_url) if r.decision == "deny"]
    if status == 403 and method != "GET":
        assert len(denials) == denials_before + 1
        assert denials[-1].principal == user and denials[-1].outcome == "denied"
        assert denials[-1].reason == error["message"]
    else:
        assert len(denials) == denials_before
    assert await audit_verifies(db_url)
