"""Attacks on agent ownership, one line each: who sends which request against the seeded
`demo/supabase-agent` and `demo`'s members, and what the answer must say.

The world they run in (`test_ownership_attacks.py`): `demo` was seeded by the operator (no
members: global admins administer it); `mallory` (execute_basic) is admin of her own `evil`;
`eddie` is an editor of `demo`, `vera` a viewer of it, `vic` an editor at the `view_only` level;
`scoped` is a global admin whose key is scoped to `agent:execute:memory`.
"""

from __future__ import annotations

import json
from typing import Any

from toolagent.data import seed_files

#: The seeded record of demo/supabase-agent, as PUT sends it.
SEED: dict[str, Any] = json.loads(seed_files()[0].read_text(encoding="utf-8"))
DEFINITION: dict[str, Any] = json.loads(SEED["yaml"])


def _record(definition: dict[str, Any]) -> dict[str, Any]:
    return {**{k: v for k, v in SEED.items() if k not in ("organization_slug", "slug")}, "yaml": json.dumps(definition)}


def _without_security() -> dict[str, Any]:
    configuration = {k: v for k, v in DEFINITION["configuration"].items() if k != "security"}
    return _record({**DEFINITION, "configuration": configuration})


def _with_security(security: dict[str, Any]) -> dict[str, Any]:
    return _record({**DEFINITION, "configuration": {**DEFINITION["configuration"], "security": security}})


def _with_params(params: dict[str, Any]) -> dict[str, Any]:
    tool_params = {**DEFINITION["configuration"]["toolParams"], **params}
    return _record({**DEFINITION, "configuration": {**DEFINITION["configuration"], "toolParams": tool_params}})


#: The demo agent with its security block stripped (no table allowlist, default denylist).
STRIPPED = _without_security()
#: The demo agent allowing every table and every operation.
OPENED = _with_security({"denied_operations": [], "allowed_tables": None})
#: The demo agent running the attacker's SQL on the owner's next BUILD, security left as it is.
HIJACKED = _with_params({"supabase/generate-sql": {"query": "select passwd from pg_shadow", "max_rows": 100}})
#: A new agent planted in `demo`.
PLANTED = {
    "display_name": "planted",
    "agent_type": "tool",
    "mode_profile": "tool_full",
    "status": "active",
    "yaml": json.dumps({"metadata": {"name": "planted"}, "configuration": {"tools": ["probe/echo"]}}),
}

AGENT = "/api/agents/demo/supabase-agent"

#: (name, user, method, path, JSON body, status, needles in the error message)
OWNERSHIP_ATTACKS: list[tuple[str, str, str, str, Any, int, tuple[str, ...]]] = [
    (
        "another org's key strips security",
        "mallory",
        "PUT",
        AGENT,
        STRIPPED,
        403,
        ("mallory", "'demo'", "admin role", "security block", "toolagent orgs grant demo mallory --role admin"),
    ),
    ("another org's key opens security", "mallory", "PUT", AGENT, OPENED, 403, ("admin role",)),
    (
        "another org's key rewrites the params",
        "mallory",
        "PUT",
        AGENT,
        HIJACKED,
        403,
        ("editor role", "is not a member", "toolagent orgs grant demo mallory --role editor"),
    ),
    (
        "another org's key re-sends the agent unchanged",
        "mallory",
        "PUT",
        AGENT,
        _record(DEFINITION),
        403,
        ("editor role",),
    ),
    ("another org's key deletes the agent", "mallory", "DELETE", AGENT, None, 403, ("admin role", "security block")),
    (
        "another org's key plants an agent",
        "mallory",
        "PUT",
        "/api/agents/demo/planted",
        PLANTED,
        403,
        ("may not create agent 'demo/planted'", "editor role"),
    ),
    (
        "an editor strips security",
        "eddie",
        "PUT",
        AGENT,
        STRIPPED,
        403,
        ("eddie", "admin role", "has the editor role", "security block"),
    ),
    ("an editor opens security", "eddie", "PUT", AGENT, OPENED, 403, ("admin role",)),
    ("an editor deletes an agent with security", "eddie", "DELETE", AGENT, None, 403, ("admin role",)),
    ("a viewer rewrites the params", "vera", "PUT", AGENT, HIJACKED, 403, ("has the viewer role", "editor role")),
    ("a view_only user with the editor role", "vic", "PUT", AGENT, HIJACKED, 403, ("view_only",)),
    (
        "a global admin key scoped to one category",
        "scoped",
        "PUT",
        AGENT,
        STRIPPED,
        403,
        ("scoped to tool categories", "admin role"),
    ),
    (
        "another org's key makes itself admin of demo",
        "mallory",
        "PUT",
        "/api/orgs/demo/members/mallory",
        {"role": "admin"},
        403,
        ("manage the members of organization 'demo'",),
    ),
    (
        "an editor makes itself admin",
        "eddie",
        "PUT",
        "/api/orgs/demo/members/eddie",
        {"role": "admin"},
        403,
        ("has the editor role",),
    ),
    (
        "another org's key removes demo's editor",
        "mallory",
        "DELETE",
        "/api/orgs/demo/members/eddie",
        None,
        403,
        ("manage the members",),
    ),
    (
        "another org's key lists demo's members",
        "mallory",
        "GET",
        "/api/orgs/demo/members",
        None,
        403,
        ("list the members",),
    ),
    (
        "a look-alike organization",
        "mallory",
        "PUT",
        "/api/agents/Demo/supabase-agent",
        STRIPPED,
        400,
        ("organization 'Demo' does not exist", "lower-case"),
    ),
    (
        "a look-alike organization with a trailing space",
        "mallory",
        "PUT",
        "/api/agents/demo%20/supabase-agent",
        STRIPPED,
        400,
        ("lower-case",),
    ),
]
