"""Organizations over the API in process, on SQLite and PostgreSQL: starting an organization with
its first agent, members and their roles, what each role may change, and the audit rows (with
their diffs) every change leaves in a chain that verifies."""

from __future__ import annotations

import json

import anyio
import pytest
from _support.org_harness import api_clients, audit_rows, audit_verifies, body, definition, grant, provision

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]

USERS = [
    ("ann", "admin"),
    ("olga", "execute_basic"),
    ("eddie", "execute_basic"),
    ("vera", "execute_basic"),
    ("otto", "execute_advanced"),
]
GUARDED = definition(
    "guarded",
    ["db/query"],
    security={"denied_operations": ["DROP"], "allowed_tables": ["users"]},
    params={"db/query": {"sql": "select 1", "api_key": "sk-live-0123456789abcdef0123456789abcdef"}},
)


async def test_the_first_agent_starts_an_organization_administered_by_its_author(db_url: str) -> None:
    keys = await provision(db_url, USERS)
    async with api_clients(db_url, keys) as c:
        created = await c["olga"].put("/api/agents/acme/guarded", json=body(GUARDED))
        assert created.status_code == 200 and created.json()["outcome"] == "inserted", created.text

        mine = (await c["olga"].get("/api/orgs")).json()["organizations"]
        assert [(o["slug"], o["role"], o["members"], o["admins"], o["agents"], o["createdBy"]) for o in mine] == [
            ("acme", "admin", 1, 1, 1, "olga")
        ]
        assert (await c["eddie"].get("/api/orgs")).json()["organizations"] == []  # not his
        assert [o["slug"] for o in (await c["ann"].get("/api/orgs")).json()["organizations"]] == ["acme"]

        # Another user may not start an organization of the same name, nor add to it.
        taken = await c["otto"].put("/api/agents/acme/mine", json=body(definition("mine")))
        assert taken.status_code == 403 and "is not a member" in taken.json()["error"]["message"]

    rows = await audit_rows(db_url, event_prefix="org.")
    assert [(r.event, r.principal, r.arguments["organization"], r.arguments.get("admin")) for r in rows] == [
        ("org.create", "olga", "acme", "olga")
    ]
    created_row = (await audit_rows(db_url, event_prefix="agent.create"))[0]
    assert created_row.principal == "olga" and created_row.api_key_id and created_row.level == "execute_basic"
    assert created_row.arguments["agent"] == "acme/guarded" and created_row.arguments["via"] == "api"
    diff = {d["path"]: d for d in created_row.arguments["diff"]}
    assert diff["yaml.configuration.security.allowed_tables"]["new"] == ["users"]
    assert diff["yaml.configuration.toolParams.db/query.api_key"] == {
        "path": "yaml.configuration.toolParams.db/query.api_key",
        "new": "[REDACTED]",
    }
    assert "0123456789abcdef" not in json.dumps([r.to_json() for r in await audit_rows(db_url)])
    assert await audit_verifies(db_url)


async def test_what_each_role_may_change(db_url: str) -> None:
    keys = await provision(db_url, USERS)
    async with api_clients(db_url, keys) as c:
        olga, eddie, vera, ann = c["olga"], c["eddie"], c["vera"], c["ann"]
        assert (await olga.put("/api/agents/acme/guarded", json=body(GUARDED))).status_code == 200
        for user, role in (("eddie", "editor"), ("vera", "viewer")):
            granted = await olga.put(f"/api/orgs/acme/members/{user}", json={"role": role})
            assert granted.status_code == 200 and granted.json()["outcome"] == "granted", granted.text
            assert granted.json()["member"]["grantedBy"] == "olga"
        members = (await olga.get("/api/orgs/acme/members")).json()["members"]
        assert [(m["user"], m["role"]) for m in members] == [("olga", "admin"), ("eddie", "editor"), ("vera", "viewer")]

        # The editor changes params and adds agents; the viewer changes nothing.
        params = {**GUARDED["configuration"]["toolParams"], "db/query": {"sql": "select 2"}}
        edited = {**GUARDED, "configuration": {**GUARDED["configuration"], "toolParams": params}}
        updated = await eddie.put("/api/agents/acme/guarded", json=body(edited))
        assert updated.status_code == 200 and updated.json()["outcome"] == "updated", updated.text
        assert (await eddie.put("/api/agents/acme/plain", json=body(definition("plain")))).status_code == 200
        assert (
            await vera.put("/api/agents/acme/plain", json=body(definition("plain"), description="x"))
        ).status_code == 403
        # The editor may not touch security; the org's admin may.
        stripped = {**edited, "configuration": {k: v for k, v in edited["configuration"].items() if k != "security"}}
        refused = await eddie.put("/api/agents/acme/guarded", json=body(stripped))
        assert refused.status_code == 403 and "security block" in refused.json()["error"]["message"]
        assert (await eddie.delete("/api/agents/acme/guarded")).status_code == 403
        assert (await olga.put("/api/agents/acme/guarded", json=body(stripped))).status_code == 200
        # Without its security block the editor may delete it; a plain one too.
        assert (await eddie.delete("/api/agents/acme/guarded")).status_code == 200
        assert (await vera.delete("/api/agents/acme/plain")).status_code == 403
        assert (await eddie.delete("/api/agents/acme/plain")).status_code == 200

        # Roles change and go; the editor may not manage members, the global admin may.
        assert (await eddie.put("/api/orgs/acme/members/vera", json={"role": "editor"})).status_code == 403
        changed = await ann.put("/api/orgs/acme/members/vera", json={"role": "editor"})
        assert changed.json()["outcome"] == "changed"
        again = await ann.put("/api/orgs/acme/members/vera", json={"role": "editor"})
        assert again.json()["outcome"] == "unchanged"
        assert (await olga.delete("/api/orgs/acme/members/vera")).json()["revoked"]["role"] == "editor"
        gone = await olga.delete("/api/orgs/acme/members/vera")
        assert gone.status_code == 404 and "has no role" in gone.json()["error"]["message"]
        assert (await vera.put("/api/agents/acme/plain", json=body(definition("plain")))).status_code == 403
        unknown = await olga.put("/api/orgs/acme/members/nobody", json={"role": "viewer"})
        assert unknown.status_code == 404 and "toolagent users add nobody" in unknown.json()["error"]["message"]
        bad_role = await olga.put("/api/orgs/acme/members/vera", json={"role": "owner"})
        assert bad_role.status_code == 400 and bad_role.json()["error"]["details"][0]["field"] == "role"
        missing = await ann.get("/api/orgs/nowhere/members")
        assert missing.status_code == 404 and "organization 'nowhere' not found" in missing.json()["error"]["message"]

    changes = [
        (r.event, r.principal, r.decision) for r in await audit_rows(db_url) if r.event.startswith(("agent.", "org."))
    ]
    assert changes == [
        ("org.create", "olga", "allow"),
        ("agent.create", "olga", "allow"),
        ("org.grant", "olga", "allow"),
        ("org.grant", "olga", "allow"),
        ("agent.update", "eddie", "allow"),
        ("agent.create", "eddie", "allow"),
        ("agent.update", "vera", "deny"),
        ("agent.update", "eddie", "deny"),
        ("agent.delete", "eddie", "deny"),
        ("agent.update", "olga", "allow"),
        ("agent.delete", "eddie", "allow"),
        ("agent.delete", "vera", "deny"),
        ("agent.delete", "eddie", "allow"),
        ("org.grant", "eddie", "deny"),
        ("org.grant", "ann", "allow"),
        ("org.revoke", "olga", "allow"),
        ("agent.create", "vera", "deny"),
    ]
    update = next(r for r in await audit_rows(db_url, event_prefix="agent.update") if r.principal == "eddie")
    assert update.arguments["diff"] == [
        {"path": "yaml.configuration.toolParams.db/query.api_key", "old": "[REDACTED]"},
        {"path": "yaml.configuration.toolParams.db/query.sql", "old": "select 1", "new": "select 2"},
    ]
    assert update.reason == (
        "updated agent acme/guarded: yaml.configuration.toolParams.db/query.api_key, "
        "yaml.configuration.toolParams.db/query.sql"
    )
    grants = await audit_rows(db_url, event_prefix="org.grant")
    assert grants[-1].arguments["diff"] == [{"path": "role", "old": "viewer", "new": "editor"}]
    assert await audit_verifies(db_url)


async def test_concurrent_first_agents_start_the_organization_once(db_url: str) -> None:
    keys = await provision(db_url, [(f"u{i}", "execute_basic") for i in range(6)])
    answers: dict[str, int] = {}
    async with api_clients(db_url, keys) as c:

        async def put(user: str) -> None:
            response = await c[user].put(f"/api/agents/race/{user}", json=body(definition(user)))
            answers[user] = response.status_code

        async with anyio.create_task_group() as tg:
            for user in keys:
                tg.start_soon(put, user)
        members = (await c[next(u for u, s in answers.items() if s == 200)].get("/api/orgs/race/members")).json()
    assert sorted(answers.values()) == [200, 403, 403, 403, 403, 403], answers
    winner = next(u for u, s in answers.items() if s == 200)
    assert [(m["user"], m["role"]) for m in members["members"]] == [(winner, "admin")]
    assert len(await audit_rows(db_url, event_prefix="org.create")) == 1
    assert await audit_verifies(db_url)


async def test_operator_grants_open_an_organization_seeded_for_global_admins(db_url: str) -> None:
    from toolagent.data import seed_files as packaged_seeds
    from toolagent.engine.principals import local_user_name
    from toolagent.seeding import seed_files
    from toolagent.store import open_store

    keys = await provision(db_url, [("eddie", "execute_basic"), ("ann", "admin")])
    async with open_store(db_url) as store:
        assert await seed_files(store, packaged_seeds()) == [("demo/supabase-agent", "inserted")]
    async with api_clients(db_url, keys) as c:
        demo = (await c["ann"].get("/api/orgs")).json()["organizations"]
        assert [(o["slug"], o["members"], o["admins"], o["createdBy"] is not None) for o in demo] == [
            ("demo", 0, 0, True)
        ]
        agent = await c["eddie"].get("/api/agents/demo/supabase-agent")
        record = {
            k: v
            for k, v in agent.json()["agent"].items()
            if k in ("display_name", "agent_type", "mode_profile", "status", "yaml", "version")
        }
        assert (
            await c["eddie"].put("/api/agents/demo/supabase-agent", json={**record, "version": "0.2"})
        ).status_code == 403
        await grant(db_url, "demo", "eddie", "editor")
        assert (
            await c["eddie"].put("/api/agents/demo/supabase-agent", json={**record, "version": "0.2"})
        ).status_code == 200
    me = local_user_name()
    rows = [(r.event, r.principal, r.decision, r.arguments["via"]) for r in await audit_rows(db_url)]
    assert rows == [
        ("org.create", me, "allow", "cli"),
        ("agent.create", me, "allow", "cli"),
        ("agent.update", "eddie", "deny", "api"),
        ("org.grant", "ops", "allow", "cli"),
        ("agent.update", "eddie", "allow", "api"),
    ]
    assert await audit_verifies(db_url)


async def test_an_organization_role_never_exceeds_the_level(db_url: str) -> None:
    keys = await provision(db_url, [*USERS, ("vic", "view_only")])
    async with api_clients(db_url, keys) as c:
        assert (await c["olga"].put("/api/agents/acme/guarded", json=body(GUARDED))).status_code == 200
        await grant(db_url, "acme", "vic", "admin")
        await grant(db_url, "acme", "vera", "viewer")
        answers = [
            await c["vic"].put("/api/orgs/acme/members/eddie", json={"role": "admin"}),
            await c["vic"].delete("/api/orgs/acme/members/vera"),
            await c["vic"].delete("/api/orgs/acme/members/olga"),
            await c["vic"].get("/api/orgs/acme/members"),
            await c["vic"].put("/api/agents/acme/guarded", json=body(GUARDED)),
        ]
        assert [a.status_code for a in answers] == [403] * 5, [a.text for a in answers]
        for answer in answers[:4]:
            assert "its level view_only acts as viewer at most" in answer.json()["error"]["message"]
        members = (await c["olga"].get("/api/orgs/acme/members")).json()["members"]
        assert sorted((m["user"], m["role"]) for m in members) == [
            ("olga", "admin"),
            ("vera", "viewer"),
            ("vic", "admin"),
        ]
    denied = [r for r in await audit_rows(db_url, event_prefix="org.") if r.decision == "deny"]
    assert [(r.event, r.principal) for r in denied] == [
        ("org.grant", "vic"),
        ("org.revoke", "vic"),
        ("org.revoke", "vic"),
    ]
    assert await audit_verifies(db_url)
