"""Secrets written into an agent definition, on SQLite and PostgreSQL: those who may edit the agent
(its organization's editors and admins, global admins) read it as stored; every other key that may
read agents (a viewer member, a non-member, a `view_only` user) reads it with the secrets masked,
in the record's YAML text and in the normalized definition, of one agent and in the listing."""

from __future__ import annotations

import json

import pytest
from _support.org_harness import api_clients, body, definition, grant, provision

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

USERS = [
    ("ann", "admin"),
    ("olga", "execute_basic"),
    ("eddie", "execute_basic"),
    ("vera", "execute_basic"),
    ("otto", "execute_advanced"),
    ("vic", "view_only"),
]
#: What must not reach a reader who may not edit: under a secret-naming key, in a URL, by its shape.
SECRETS = ("0123456789abcdef0123456789abcdef", "S3cretPassw0rd", "AKIAIOSFODNN7EXAMPLE", "plain-env-value")
LEAKY = definition(
    "leaky",
    ["db/query"],
    params={
        "db/query": {
            "sql": "select 1",
            "api_key": "sk-live-0123456789abcdef0123456789abcdef",
            "dsn_note": "postgresql://app:S3cretPassw0rd@db.internal/prod",
            "note": "uses AKIAIOSFODNN7EXAMPLE",
            "SECRET_TOKEN_IN_ENV": "plain-env-value",
        }
    },
)


async def test_secrets_in_a_definition_are_masked_for_those_who_may_not_edit_it(db_url: str) -> None:
    keys = await provision(db_url, USERS)
    async with api_clients(db_url, keys) as c:
        assert (await c["olga"].put("/api/agents/acme/leaky", json=body(LEAKY))).status_code == 200
        await grant(db_url, "acme", "eddie", "editor")
        await grant(db_url, "acme", "vera", "viewer")
        await grant(db_url, "acme", "vic", "admin")  # a role does not lift a view_only level

        reads = {}
        for name in c:
            one = await c[name].get("/api/agents/acme/leaky")
            listed = await c[name].get("/api/agents")
            assert one.status_code == 200 and listed.status_code == 200, (name, one.text, listed.text)
            reads[name] = (one.json(), listed.json())

    for name, (one, listed) in reads.items():
        text = json.dumps([one, listed])
        shown = [s for s in SECRETS if s in text]
        if name in ("ann", "olga", "eddie"):
            assert shown == list(SECRETS), name  # editors see what they must edit
            continue
        assert shown == [], (name, shown)
        params = one["definition"]["configuration"]["toolParams"]["db/query"]
        assert params["api_key"] == "[REDACTED]" and params["sql"] == "select 1", name
        assert "[REDACTED]" in one["agent"]["yaml"] and "select 1" in one["agent"]["yaml"]
        assert one["agent"]["valid"] is True and one["agent"]["tools"] == ["db/query"]
        [row] = listed["agents"]
        assert row["yaml"] == one["agent"]["yaml"]
