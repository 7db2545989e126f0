"""Who may change an organization's agents: roles, the rules, and messages that name the fix.

An agent belongs to the organization of its `org/slug`. Users belong to organizations with a role:

| role     | may                                                                            |
| ---      | ---                                                                            |
| `viewer` | nothing more than any key (reading agents and running them stay open to all)  |
| `editor` | create, update and delete the organization's agents, leaving `security` alone  |
| `admin`  | all of that, change an agent's `security` block, and manage the members        |

A user whose global level is `admin` acts as admin of every organization, unless the API key in
use is scoped to tool categories: such a key acts only with the user's memberships. A role never
exceeds what the user's level allows (`LEVEL_ROLE_CAP`): a `view_only` user acts as a `viewer`
whatever role it was granted, so it changes no agent and manages no members (the role it holds
takes effect once its level is raised). A level grants no organization role by itself either:
only `admin` does, as above. Storing the first agent of an organization that does
not exist yet creates it with the caller as its admin; any level that may change agents may do
that, and the new organization's name must be a plain slug (`NEW_ORG_SLUG`), so look-alikes
(`Demo`, `demo `) cannot be started next to an existing one. The local operator (the CLI, which
opens the store itself) is not gated, only audited.

These functions are pure: `engine.orgs` reads the organization's state and the stored agent in
the transaction that writes the change, and asks them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from ..agents.models import AgentRecord, Security
from ..agents.validation import parse_document
from ..errors import UsageError

Role = Literal["viewer", "editor", "admin"]
Action = Literal["create", "update", "delete"]

#: Membership roles, weakest first.
ROLES: Final[tuple[Role, ...]] = ("viewer", "editor", "admin")
_RANK: Final[dict[str, int]] = {r: i for i, r in enumerate(ROLES)}
#: Global levels that may change agents at all (and so start an organization with its first agent).
EDITING_LEVELS: Final[frozenset[str]] = frozenset({"execute_basic", "execute_advanced", "admin"})
#: The name a new organization must have: lower-case letters, digits, `-` and `_`, 1-100 long.
NEW_ORG_SLUG: Final[re.Pattern[str]] = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")


def parse_role(value: str) -> Role:
    """`value` as a role.

    Raises:
        UsageError: not one of `ROLES`.
    """
    if value not in _RANK:
        raise UsageError(f"unknown role {value!r}: use one of {', '.join(ROLES)}")
    return cast(Role, value)  # one of ROLES, checked above


def at_least(role: str | None, needed: Role) -> bool:
    """`role` is `needed` or stronger (None, no membership, is weaker than any role)."""
    return role is not None and _RANK.get(role, -1) >= _RANK[needed]


def check_new_org(org: str) -> str:
    """`org` if it may name a new organization.

    Raises:
        UsageError: it is not a plain slug.
    """
    if not NEW_ORG_SLUG.match(org):
        raise UsageError(
            f"organization '{org}' does not exist, and a new organization's name must be 1-100 "
            "lower-case letters, digits, '-' and '_' (starting with a letter or digit), e.g. 'acme-data'"
        )
    return org


@dataclass(frozen=True)
class Actor:
    """Who asks for a change: an API caller, or the local operator running the CLI."""

    name: str
    """User name; recorded in the audit log."""
    level: str | None = None
    """The user's global permission level (None for the operator)."""
    api_key_id: str | None = None
    """The API key in use, if any."""
    scoped: bool = False
    """The API key is scoped to some tool categories: no global admin power over organizations."""
    operator: bool = False
    """The local operator: whoever can open the store changes it directly, so the CLI is not gated."""

    @classmethod
    def from_principal(cls, principal: Any, api_key: Any = None) -> Actor:
        """The actor of an authenticated API request."""
        return cls(
            name=str(principal.name),
            level=str(principal.level),
            api_key_id=getattr(api_key, "id", None),
            scoped=getattr(principal, "categories", None) is not None,
        )

    @classmethod
    def local_operator(cls, name: str) -> Actor:
        """The CLI's actor, named after `--user` or the OS account."""
        return cls(name=name, operator=True)

    @property
    def is_global_admin(self) -> bool:
        """Acts as admin of every organization."""
        return self.operator or (self.level == "admin" and not self.scoped)

    @property
    def via(self) -> str:
        """`cli` or `api`, recorded in the audit row."""
        return "cli" if self.operator else "api"


@dataclass(frozen=True)
class OrgState:
    """What the rules need to know about one organization, read in the writing transaction."""

    slug: str
    """The organization."""
    exists: bool
    """It exists (has a row, or agents)."""
    role: str | None = None
    """The actor's membership role in it, if any."""
    has_admins: bool = False
    """Some member is an admin (else only global admins administer it)."""


#: The strongest role a global level may act with in any organization, whatever role it holds.
LEVEL_ROLE_CAP: Final[dict[str, Role]] = {"view_only": "viewer"}


def effective_role(actor: Actor, state: OrgState) -> str | None:
    """The role the actor acts with in the organization: its membership, capped by its level."""
    if actor.is_global_admin:
        return "admin"
    cap = LEVEL_ROLE_CAP.get(actor.level or "") if not actor.operator else None
    if cap is not None and state.role is not None and not at_least(cap, state.role):  # type: ignore[arg-type]
        return cap
    return state.role


def _security_block(record: AgentRecord | None) -> tuple[bool, Any]:
    """(present, normalized value) of the raw `configuration.security` block of a record."""
    if record is None:
        return False, None
    try:
        document = parse_document(record.yaml)
    except Exception:  # noqa: BLE001 - a stored row that no longer parses: compare its text instead
        return True, record.yaml
    configuration = document.get("configuration") if isinstance(document, dict) else None
    if not isinstance(configuration, dict) or "security" not in configuration:
        return False, None
    raw = configuration["security"]
    try:
        return True, Security.model_validate(raw or {}).model_dump(mode="json")
    except Exception:  # noqa: BLE001 - compared as written when it does not validate
        return True, raw


def security_changed(old: AgentRecord | None, new: AgentRecord | None) -> bool:
    """The change adds, removes or edits the `configuration.security` block (an absent agent has none).

    Blocks are compared after validation, so `[drop]` and `[DROP]` are the same block.
    """
    return _security_block(old) != _security_block(new)


def needed_role(old: AgentRecord | None, new: AgentRecord | None) -> Role:
    """The role a change from `old` to `new` (None: absent) needs in the agent's organization."""
    return "admin" if security_changed(old, new) else "editor"


def grant_hint(org: str, user: str, role: Role, *, has_admins: bool = True) -> str:
    """The fix for a missing role: what an admin of `org` runs (a global admin, when it has none)."""
    who = (
        f"an admin of '{org}' (or a global admin)" if has_admins else f"'{org}' has no admin members, so a global admin"
    )
    return (
        f"{who} grants it with `toolagent orgs grant {org} {user} --role {role}` or PUT /api/orgs/{org}/members/{user}"
    )


def _has(actor: Actor, role: str | None) -> str:
    has = f"has the {role} role" if role else "is not a member"
    if actor.level == "admin" and actor.scoped:
        has += " (its API key is scoped to tool categories, so it does not act as a global admin)"
    return has


def check_level(actor: Actor) -> str | None:
    """Why `actor`'s global level changes no agent at all (`view_only`), or None."""
    if actor.operator or actor.level in EDITING_LEVELS:
        return None
    return (
        f"user '{actor.name}' ({actor.level}) may not change agents: requires execute_basic or higher "
        f"(`toolagent users set-level {actor.name} execute_basic`) and a role in the agent's organization"
    )


def check_agent_change(actor: Actor, state: OrgState, action: Action, ref: str, needed: Role) -> str | None:
    """Why `actor` may not `action` the agent `ref` (needing `needed` in its organization), or None.

    A `create` in an organization that does not exist yet is allowed to any level that may
    change agents (the organization is then created with the actor as its admin).
    """
    if actor.operator:
        return None
    refusal = check_level(actor)
    if refusal is not None:
        return refusal
    if not state.exists and action == "create":
        return None
    role = effective_role(actor, state)
    if at_least(role, needed):
        return None
    has = _has(actor, role)
    why = " because the change adds, removes or edits its security block" if needed == "admin" else ""
    verb = {"create": "create", "update": "update", "delete": "delete"}[action]
    return (
        f"user '{actor.name}' may not {verb} agent '{ref}': that needs the {needed} role in organization "
        f"'{state.slug}'{why}, and '{actor.name}' {has} there; "
        f"{grant_hint(state.slug, actor.name, needed, has_admins=state.has_admins)}"
    )


def may_edit_agents(actor: Actor, state: OrgState) -> bool:
    """`actor` may change the organization's agents (so sees their secrets as stored; everyone else
    reads them masked, `engine.agent_masking`)."""
    if actor.operator:
        return True
    return check_level(actor) is None and at_least(effective_role(actor, state), "editor")


def check_org_admin(actor: Actor, state: OrgState, what: str) -> str | None:
    """Why `actor` may not `what` (e.g. "manage the members of") the organization, or None."""
    role = effective_role(actor, state)
    if at_least(role, "admin"):
        return None
    if role != state.role:
        return (
            f"user '{actor.name}' may not {what} organization '{state.slug}': it has the {state.role} role "
            f"there, but its level {actor.level} acts as {role} at most in any organization "
            f"(`toolagent users set-level {actor.name} execute_basic` raises it)"
        )
    has = _has(actor, state.role)
    return (
        f"user '{actor.name}' may not {what} organization '{state.slug}': that needs its admin role "
        f"(or the global admin level), and '{actor.name}' {has} there; "
        f"{grant_hint(state.slug, actor.name, 'admin', has_admins=state.has_admins)}"
    )


__all__ = [
    "EDITING_LEVELS",
    "LEVEL_ROLE_CAP",
    "NEW_ORG_SLUG",
    "ROLES",
    "Action",
    "Actor",
    "OrgState",
    "Role",
    "at_least",
    "check_agent_change",
    "check_level",
    "check_new_org",
    "check_org_admin",
    "effective_role",
    "grant_hint",
    "may_edit_agents",
    "needed_role",
    "parse_role",
    "security_changed",
]
