"""The ownership rules as a table (who may create, update, delete which agent, and manage whose
members), the security-change test, and the audit diff of an agent change."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolagent.agents.models import AgentRecord
from toolagent.engine.agent_diff import MAX_PATHS, MAX_VALUE_CHARS, agent_diff
from toolagent.engine.ownership import (
    Actor,
    OrgState,
    check_agent_change,
    check_level,
    check_new_org,
    check_org_admin,
    effective_role,
    needed_role,
    parse_role,
    security_changed,
)
from toolagent.errors import UsageError
from toolagent.model.redaction import REDACTED

SECURITY = {"denied_operations": ["DROP"], "allowed_tables": ["users"]}


def record(
    security: dict[str, Any] | None = None,
    *,
    params: dict[str, Any] | None = None,
    raw: str | None = None,
    **fields: Any,
) -> AgentRecord:
    configuration: dict[str, Any] = {"tools": ["db/query"], "toolParams": params or {}}
    if security is not None:
        configuration["security"] = security
    text = raw if raw is not None else json.dumps({"metadata": {"name": "a"}, "configuration": configuration})
    values = {
        "organization_slug": "acme",
        "slug": "a",
        "display_name": "A",
        "agent_type": "tool",
        "mode_profile": "tool_full",
        "status": "active",
        "yaml": text,
        **fields,
    }
    return AgentRecord(**values)


BASIC = Actor("bob", "execute_basic")
ADMIN = Actor("ann", "admin")
SCOPED_ADMIN = Actor("sam", "admin", scoped=True)
VIEW_ONLY = Actor("vic", "view_only")
OPERATOR = Actor.local_operator("ops")

ACME = OrgState("acme", exists=True)
NEW = OrgState("fresh", exists=False)


def acme(role: str | None) -> OrgState:
    return OrgState("acme", exists=True, role=role)


#: (actor, organization state, action, role needed, allowed)
RULES: list[tuple[Actor, OrgState, str, str, bool]] = [
    (BASIC, acme(None), "update", "editor", False),
    (BASIC, acme("viewer"), "update", "editor", False),
    (BASIC, acme("editor"), "update", "editor", True),
    (BASIC, acme("editor"), "update", "admin", False),
    (BASIC, acme("editor"), "delete", "editor", True),
    (BASIC, acme("editor"), "delete", "admin", False),
    (BASIC, acme("admin"), "update", "admin", True),
    (BASIC, acme(None), "create", "editor", False),  # an existing organization: no planting
    (BASIC, NEW, "create", "editor", True),  # a new one: started with the caller as its admin
    (BASIC, NEW, "create", "admin", True),
    (ADMIN, acme(None), "update", "admin", True),  # global admins administer every organization
    (ADMIN, acme(None), "delete", "admin", True),
    (SCOPED_ADMIN, acme(None), "update", "editor", False),  # ... but not through a category-scoped key
    (SCOPED_ADMIN, acme("editor"), "update", "editor", True),
    (VIEW_ONLY, acme("admin"), "update", "editor", False),  # view_only changes no agent, whatever the role
    (VIEW_ONLY, NEW, "create", "editor", False),
    (OPERATOR, acme(None), "update", "admin", True),  # the CLI's operator is not gated
]


@pytest.mark.parametrize(("who", "state", "action", "needed", "allowed"), RULES)
def test_agent_change_rules(who: Actor, state: OrgState, action: str, needed: str, allowed: bool) -> None:
    reason = check_agent_change(who, state, action, f"{state.slug}/a", needed)  # type: ignore[arg-type]
    assert (reason is None) == allowed, reason
    if reason is not None:
        assert who.name in reason and (f"'{state.slug}'" in reason or who.level == "view_only")


def test_a_refusal_names_the_role_and_the_command_that_grants_it() -> None:
    reason = check_agent_change(BASIC, acme("editor"), "update", "acme/a", "admin")
    assert reason is not None
    assert "needs the admin role in organization 'acme'" in reason and "security block" in reason
    assert "has the editor role" in reason and "toolagent orgs grant acme bob --role admin" in reason
    assert "PUT /api/orgs/acme/members/bob" in reason
    level = check_level(VIEW_ONLY)
    assert level is not None and "view_only" in level and "toolagent users set-level vic execute_basic" in level


@pytest.mark.parametrize(
    ("who", "role", "allowed"),
    [
        (BASIC, None, False),
        (BASIC, "editor", False),
        (BASIC, "admin", True),
        (ADMIN, None, True),
        (SCOPED_ADMIN, None, False),
        (OPERATOR, None, True),
        (VIEW_ONLY, "admin", False),  # a role never exceeds the level: view_only acts as viewer
        (VIEW_ONLY, "editor", False),
    ],
)
def test_member_management_needs_the_admin_role(who: Actor, role: str | None, allowed: bool) -> None:
    reason = check_org_admin(who, acme(role), "manage the members of")
    assert (reason is None) == allowed, reason
    if who is VIEW_ONLY:
        assert reason is not None and "view_only acts as viewer at most" in reason
        assert "toolagent users set-level vic execute_basic" in reason


@pytest.mark.parametrize("role", [None, "viewer", "editor", "admin"])
def test_a_role_never_exceeds_the_level(role: str | None) -> None:
    assert effective_role(VIEW_ONLY, acme(role)) == (None if role is None else "viewer")
    assert effective_role(BASIC, acme(role)) == role


#: (old security block, new security block, changed) — None: no block; "absent": no agent.
SECURITY_CHANGES: list[tuple[Any, Any, bool]] = [
    (SECURITY, SECURITY, False),
    (SECURITY, {"allowed_tables": ["users"], "denied_operations": ["drop"]}, False),  # same block, other spelling
    (SECURITY, None, True),  # stripped
    (None, SECURITY, True),  # added
    (SECURITY, {**SECURITY, "allowed_tables": None}, True),  # opened
    (SECURITY, {**SECURITY, "denied_operations": []}, True),
    (None, None, False),
    (None, {}, True),  # an explicit empty block is a block
    ("absent", SECURITY, True),  # a new agent with a block
    ("absent", None, False),
    (SECURITY, "absent", True),  # deleting an agent with a block
    (None, "absent", False),
]


@pytest.mark.parametrize(("old", "new", "changed"), SECURITY_CHANGES)
def test_security_changes(old: Any, new: Any, changed: bool) -> None:
    before = None if old == "absent" else record(old)
    after = None if new == "absent" else record(new)
    assert security_changed(before, after) is changed
    assert needed_role(before, after) == ("admin" if changed else "editor")


def test_params_changes_need_only_an_editor() -> None:
    assert needed_role(record(SECURITY), record(SECURITY, params={"db/query": {"sql": "select 2"}})) == "editor"


def test_roles_and_new_org_names() -> None:
    assert parse_role("editor") == "editor"
    with pytest.raises(UsageError, match="use one of viewer, editor, admin"):
        parse_role("owner")
    assert check_new_org("acme-data_2") == "acme-data_2"
    for bad in ("Demo", "demo ", "dèmo", "-x", "", "a" * 101, "a/b"):
        with pytest.raises(UsageError, match="lower-case letters"):
            check_new_org(bad)


# -- the audit diff ------------------------------------------------------------------------------


def by_path(diff: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["path"]: {k: v for k, v in d.items() if k != "path"} for d in diff}


def test_diff_of_an_update_lists_only_the_changed_paths() -> None:
    old = record(SECURITY, params={"db/query": {"sql": "select 1", "max_rows": 10}})
    new = record(None, params={"db/query": {"sql": "select 2", "max_rows": 10}}, description="now described")
    assert agent_diff(old, new) == [
        {"path": "description", "new": "now described"},
        {"path": "yaml.configuration.security.allowed_tables", "old": ["users"]},
        {"path": "yaml.configuration.security.denied_operations", "old": ["DROP"]},
        {"path": "yaml.configuration.toolParams.db/query.sql", "old": "select 1", "new": "select 2"},
    ]
    assert agent_diff(old, old) == []


def test_diff_of_a_create_and_a_delete_has_one_side() -> None:
    created = by_path(agent_diff(None, record(SECURITY)))
    assert created["yaml.configuration.tools"] == {"new": ["db/query"]}
    assert created["display_name"] == {"new": "A"} and all(set(v) == {"new"} for v in created.values())
    deleted = by_path(agent_diff(record(SECURITY), None))
    assert set(deleted) == set(created) and all(set(v) == {"old"} for v in deleted.values())


def test_diff_redacts_secrets_yet_shows_that_they_changed() -> None:
    old = record(
        params={
            "http/get": {
                "api_key": "sk-live-0123456789abcdef0123456789abcdef",
                "url": "https://u:hunter2hunter2@example.com/x",
            }
        }
    )
    new = record(
        params={
            "http/get": {
                "api_key": "sk-live-fedcba9876543210fedcba9876543210",
                "url": "https://u:swordfish99@example.com/x",
            }
        }
    )
    diff = by_path(agent_diff(old, new))
    text = json.dumps(diff)
    for secret in ("0123456789abcdef", "fedcba9876543210", "hunter2hunter2", "swordfish99"):
        assert secret not in text
    assert diff["yaml.configuration.toolParams.http/get.api_key"] == {"old": REDACTED, "new": REDACTED}
    assert "example.com" in diff["yaml.configuration.toolParams.http/get.url"]["new"]


def test_diff_is_compact() -> None:
    many = {f"t/{i}": {"v": i} for i in range(MAX_PATHS + 5)}
    diff = agent_diff(record(params={}), record(params=many, description="x" * 5000))
    assert len(diff) == MAX_PATHS + 1 and diff[-1] == {"path": "…", "more": 6}
    assert len(by_path(diff)["description"]["new"]) == MAX_VALUE_CHARS + 1
    assert agent_diff(record(raw="not: [valid"), record(raw="still: [bad")) == [
        {"path": "yaml", "old": "not: [valid", "new": "still: [bad"}
    ]
