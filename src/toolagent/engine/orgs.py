"""Agent changes and memberships under the ownership rules, each with its audit row.

Every write runs in one store transaction holding its organization's lock: read the stored agent
and the actor's role, decide (`engine.ownership`), write, append the audit row. So the check and
the change cannot be separated by a concurrent edit or revocation, and a change commits exactly
with its audit row. A refusal is audited too (decision `deny`, with the attempted diff) and then
raised as `PermissionDenied` (403 in the API, exit 1 in the CLI).

Audit events (column `event`; `arguments` holds the details, redacted like every audit row):

| event          | arguments                                                                  |
| ---            | ---                                                                        |
| `agent.create` | `agent`, `organization`, `via`, `diff` (every path set, `new` only)        |
| `agent.update` | `agent`, `organization`, `via`, `diff` (changed paths, `old` and `new`)    |
| `agent.delete` | `agent`, `organization`, `via`, `diff` (every path set, `old` only)        |
| `org.create`   | `organization`, `via`, `admin` (the creator, for an organization started over the API) |
| `org.grant`    | `organization`, `user`, `via`, `diff` [{`path`: `role`, `old`, `new`}]     |
| `org.revoke`   | `organization`, `user`, `via`, `diff` [{`path`: `role`, `old`}]            |

`diff` is `engine.agent_diff`'s list of `{path, old, new}`; `via` is `api` or `cli`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from ..agents.models import AgentRecord
from ..errors import NotFound, PermissionDenied, ToolAgentError
from ..model.status import AuditOutcome
from ..store.agents import AgentStore, UpsertOutcome
from ..store.db import Connection, Database, utcnow
from ..store.orgs import MemberRow, OrgRow, OrgRows
from .agent_diff import agent_diff
from .audit import AuditEntry, AuditLog
from .ownership import (
    Action,
    Actor,
    OrgState,
    Role,
    check_agent_change,
    check_level,
    check_new_org,
    check_org_admin,
    may_edit_agents,
    needed_role,
    parse_role,
)


@dataclass(frozen=True)
class _Refused:
    """A refusal decided inside a transaction that must still commit (its audit row)."""

    error: ToolAgentError


T = TypeVar("T")


def _unwrap(result: T | _Refused) -> T:
    if isinstance(result, _Refused):
        raise result.error
    return result


def _org_not_found(org: str) -> NotFound:
    return NotFound(
        f"organization '{org}' not found: it is created by storing its first agent "
        f"(PUT /api/agents/{org}/SLUG) or by `toolagent orgs grant {org} USER --role admin`"
    )


class Organizations:
    """Agent writes, organizations and memberships of one store, checked and audited."""

    def __init__(self, db: Database, audit: AuditLog | None = None) -> None:
        self.db = db
        self.audit = audit if audit is not None else AuditLog(db)
        self.rows = OrgRows(db)

    # -- state ---------------------------------------------------------------------------------------

    def _state_in(self, conn: Connection, org: str, actor: Actor) -> OrgState:
        return OrgState(
            org, OrgRows.exists_in(conn, org), OrgRows.role_in(conn, org, actor.name), OrgRows.has_admins_in(conn, org)
        )

    async def state(self, actor: Actor, org: str) -> OrgState:
        """The organization as `actor` sees it (exists, the actor's role)."""
        async with self.db.begin() as conn:
            return await conn.run_sync(self._state_in, org, actor)

    async def editable(self, actor: Actor, orgs: set[str]) -> set[str]:
        """The organizations of `orgs` whose agents `actor` may change (the others' are read masked)."""
        if actor.operator:
            return set(orgs)

        def read(conn: Connection) -> set[str]:
            return {org for org in orgs if may_edit_agents(actor, self._state_in(conn, org, actor))}

        async with self.db.begin() as conn:
            return await conn.run_sync(read)

    def _audit(
        self, conn: Connection, actor: Actor, event: str, reason: str, arguments: dict[str, Any], denied: bool = False
    ) -> None:
        self.audit.append_in(
            conn,
            AuditEntry(
                principal=actor.name,
                api_key_id=actor.api_key_id,
                level=actor.level,
                decision="deny" if denied else "allow",
                outcome=AuditOutcome.DENIED if denied else AuditOutcome.SUCCESS,
                reason=reason,
                arguments={**arguments, "via": actor.via},
                event=event,
            ),
        )

    def _create_org_in(self, conn: Connection, actor: Actor, org: str) -> None:
        """Start a new organization: the API caller becomes its admin; the operator's has no members."""
        check_new_org(org)
        now = utcnow()
        OrgRows.ensure_in(conn, org, now, by=actor.name)
        arguments: dict[str, Any] = {"organization": org}
        if not actor.operator:
            OrgRows.set_role_in(conn, org, actor.name, "admin", now, by=actor.name)
            arguments["admin"] = actor.name
        self._audit(conn, actor, "org.create", f"created organization {org}", arguments)

    # -- agents --------------------------------------------------------------------------------------

    async def check_level(self, actor: Actor, org: str, slug: str) -> None:
        """Refuse (and audit) an actor whose global level changes no agent, before its request is read.

        Raises:
            PermissionDenied: the actor is `view_only`.
        """
        reason = check_level(actor)
        if reason is not None:
            ref = f"{org}/{slug}"
            await self.db.write(self._audit, actor, "agent.update", reason, {"agent": ref, "organization": org}, True)
            raise PermissionDenied(reason)

    async def put_agent(self, actor: Actor, record: AgentRecord) -> tuple[UpsertOutcome, AgentRecord]:
        """Insert or update a (validated) agent record as `actor`.

        Raises:
            PermissionDenied: the actor's role in the organization does not allow the change.
            UsageError: the organization does not exist and its name cannot start a new one.
        """
        return _unwrap(await self.db.write(self._put_in, actor, record))

    def _put_in(
        self, conn: Connection, actor: Actor, record: AgentRecord
    ) -> tuple[UpsertOutcome, AgentRecord] | _Refused:
        org = record.organization_slug
        self.rows.lock_in(conn, org)
        state = self._state_in(conn, org, actor)
        old = AgentStore.get_in(conn, org, record.slug)
        action: Action = "create" if old is None else "update"
        refused = self._check_agent_in(conn, actor, state, action, record.ref, old, record)
        if refused is not None:
            return refused
        if not state.exists:
            self._create_org_in(conn, actor, org)
        outcome, stored = AgentStore.upsert_in(conn, record, utcnow())
        if outcome != "unchanged":
            diff = agent_diff(old, stored)
            self._audit(
                conn,
                actor,
                f"agent.{action}",
                f"{action}d agent {record.ref}{_paths(diff, action)}",
                {"agent": record.ref, "organization": org, "diff": diff},
            )
        return outcome, stored

    async def delete_agent(self, actor: Actor, org: str, slug: str) -> AgentRecord:
        """Delete an agent as `actor`; returns the record deleted.

        Raises:
            NotFound: no such agent.
            PermissionDenied: the actor's role in the organization does not allow it.
        """
        return _unwrap(await self.db.write(self._delete_in, actor, org, slug))

    def _delete_in(self, conn: Connection, actor: Actor, org: str, slug: str) -> AgentRecord | _Refused:
        self.rows.lock_in(conn, org)
        old = AgentStore.get_in(conn, org, slug)
        if old is None:
            return _Refused(NotFound(f"agent '{org}/{slug}' not found"))
        refused = self._check_agent_in(conn, actor, self._state_in(conn, org, actor), "delete", old.ref, old, None)
        if refused is not None:
            return refused
        AgentStore.delete_in(conn, org, slug)
        diff = agent_diff(old, None)
        self._audit(
            conn,
            actor,
            "agent.delete",
            f"deleted agent {old.ref}",
            {"agent": old.ref, "organization": org, "diff": diff},
        )
        return old

    def _check_agent_in(
        self,
        conn: Connection,
        actor: Actor,
        state: OrgState,
        action: Action,
        ref: str,
        old: AgentRecord | None,
        new: AgentRecord | None,
    ) -> _Refused | None:
        reason = check_agent_change(actor, state, action, ref, needed_role(old, new))
        if reason is None:
            return None
        self._audit(
            conn,
            actor,
            f"agent.{action}",
            reason,
            {"agent": ref, "organization": state.slug, "diff": agent_diff(old, new)},
            denied=True,
        )
        return _Refused(PermissionDenied(reason))

    # -- organizations and members -----------------------------------------------------------------

    async def list_orgs(self, actor: Actor) -> list[tuple[OrgRow, str | None]]:
        """The organizations `actor` may see (all for a global admin, else its own) with its role in each."""
        roles = await self.rows.roles_of(actor.name)
        rows = await self.rows.orgs(member=None if actor.is_global_admin else actor.name)
        return [(row, "admin" if actor.is_global_admin else roles.get(row.slug)) for row in rows]

    async def members(self, actor: Actor, org: str) -> list[MemberRow]:
        """The organization's members, for its admins and global admins.

        Raises:
            NotFound: no such organization. PermissionDenied: `actor` is not its admin.
        """
        state = await self.state(actor, org)
        if not state.exists:
            raise _org_not_found(org)
        reason = check_org_admin(actor, state, "list the members of")
        if reason is not None:
            raise PermissionDenied(reason)
        return await self.rows.members(org)

    async def grant(self, actor: Actor, org: str, user: str, role: str) -> tuple[str, MemberRow]:
        """Give `user` a role in `org` (replacing the one it had); returns `granted`, `changed` or
        `unchanged` and the membership. The operator may name an organization that does not exist
        yet: it is created (with no other members).

        Raises:
            UsageError: unknown role. NotFound: no such organization (API) or user.
            PermissionDenied: `actor` is not the organization's admin.
        """
        checked = parse_role(role)
        return _unwrap(await self.db.write(self._grant_in, actor, org, user, checked))

    def _grant_in(
        self, conn: Connection, actor: Actor, org: str, user: str, role: Role
    ) -> tuple[str, MemberRow] | _Refused:
        self.rows.lock_in(conn, org)
        state = self._state_in(conn, org, actor)
        refused = self._check_members_in(conn, actor, state, "org.grant", user, role)
        if refused is not None:
            return refused
        if not state.exists:
            self._create_org_in(conn, actor, org)
        else:
            OrgRows.ensure_in(conn, org, utcnow())  # an organization known only by its agents gets its row
        before = OrgRows.set_role_in(conn, org, user, role, utcnow(), by=actor.name)
        if before != role:
            self._audit(
                conn,
                actor,
                "org.grant",
                f"{user} is now {role} of {org} (was {before or 'not a member'})",
                {"organization": org, "user": user, "diff": [{"path": "role", "old": before, "new": role}]},
            )
        member = OrgRows.member_in(conn, org, user)
        assert member is not None
        return ("granted" if before is None else "unchanged" if before == role else "changed"), member

    async def revoke(self, actor: Actor, org: str, user: str) -> MemberRow:
        """Take `user`'s role in `org` away; returns the membership removed.

        Raises:
            NotFound: no such organization, or `user` is not a member.
            PermissionDenied: `actor` is not the organization's admin.
        """
        return _unwrap(await self.db.write(self._revoke_in, actor, org, user))

    def _revoke_in(self, conn: Connection, actor: Actor, org: str, user: str) -> MemberRow | _Refused:
        self.rows.lock_in(conn, org)
        state = self._state_in(conn, org, actor)
        refused = self._check_members_in(conn, actor, state, "org.revoke", user, None)
        if refused is not None:
            return refused
        member = OrgRows.member_in(conn, org, user)
        if member is None:
            return _Refused(
                NotFound(
                    f"user '{user}' has no role in organization '{org}': `toolagent orgs members {org}` lists them"
                )
            )
        OrgRows.remove_in(conn, org, user)
        self._audit(
            conn,
            actor,
            "org.revoke",
            f"{user} is no longer {member.role} of {org}",
            {"organization": org, "user": user, "diff": [{"path": "role", "old": member.role}]},
        )
        return member

    def _check_members_in(
        self, conn: Connection, actor: Actor, state: OrgState, event: str, user: str, role: Role | None
    ) -> _Refused | None:
        """Refusals shared by grant and revoke: no such organization, not its admin, no such user."""
        if not state.exists and not actor.operator:
            return _Refused(_org_not_found(state.slug))
        reason = check_org_admin(actor, state, "manage the members of")
        if reason is not None:
            arguments: dict[str, Any] = {"organization": state.slug, "user": user}
            if role is not None:
                arguments["role"] = role
            self._audit(conn, actor, event, reason, arguments, denied=True)
            return _Refused(PermissionDenied(reason))
        if not OrgRows.user_exists_in(conn, user):
            return _Refused(NotFound(f"user '{user}' not found: add it with `toolagent users add {user}`"))
        return None


#: Changed paths named in an update's one-line reason (the diff in `arguments` has them all).
REASON_PATHS = 8


def _paths(diff: list[dict[str, Any]], action: Action) -> str:
    """The changed paths of an update, for the audit row's one-line reason."""
    if action != "update":
        return ""
    paths = [d["path"] for d in diff if "more" not in d]
    more = f" and {len(paths) - REASON_PATHS} more" if len(paths) > REASON_PATHS else ""
    return ": " + ", ".join(paths[:REASON_PATHS]) + more


__all__ = ["Organizations"]
