"""Organizations and their members (`organizations`, `org_members`): the rows behind `engine.orgs`.

The `..._in` verbs run inside the caller's transaction (`Database.write`), so a change, the role
check that allowed it and its audit row commit together. `lock_in` serializes the writes of one
organization: on PostgreSQL a transaction-scoped advisory lock on its name, on SQLite the write
lock every `Database.write` transaction takes first (`BEGIN IMMEDIATE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ..model.times import as_utc
from . import engine_tables as et
from . import tables as t
from .db import Connection, Database

_O = et.organizations
_M = et.org_members


@dataclass(frozen=True)
class OrgRow:
    """An organization with its member and agent counts."""

    slug: str
    """The organization's name, the `org` of its agents' `org/slug`."""
    created_at: datetime | None
    """When it was created (for organizations that had agents before roles existed: the upgrade)."""
    created_by: str | None
    """Who created it (None: the upgrade, or an operator's seeding)."""
    members: int = 0
    """How many users have a role in it."""
    admins: int = 0
    """How many of them are admins."""
    agents: int = 0
    """How many agents it holds."""

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "slug": self.slug,
            "createdAt": self.created_at.isoformat() if self.created_at else None,
            "createdBy": self.created_by,
            "members": self.members,
            "admins": self.admins,
            "agents": self.agents,
        }


@dataclass(frozen=True)
class MemberRow:
    """A user's role in an organization."""

    org: str
    """The organization."""
    user: str
    """The user."""
    role: str
    """`viewer`, `editor` or `admin`."""
    granted_at: datetime | None
    """When the role was last set."""
    granted_by: str | None
    """Who set it."""

    def to_json(self) -> dict[str, Any]:
        """CLI/API form."""
        return {
            "organization": self.org,
            "user": self.user,
            "role": self.role,
            "grantedAt": self.granted_at.isoformat() if self.granted_at else None,
            "grantedBy": self.granted_by,
        }


def _member(row: Any) -> MemberRow:
    return MemberRow(row.org_slug, row.user_name, row.role, as_utc(row.granted_at), row.granted_by)


class OrgRows:
    """Reads and writes of organizations and memberships."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # -- inside the caller's transaction -----------------------------------------------------------

    def lock_in(self, conn: Connection, org: str) -> None:
        """Serialize this transaction with every other write to `org` until it ends."""
        if not self.db.is_sqlite:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"org:{org}"})

    @staticmethod
    def exists_in(conn: Connection, org: str) -> bool:
        """The organization has a row, or agents (a row written around the store's verbs still counts)."""
        if conn.scalar(sa.select(_O.c.slug).where(_O.c.slug == org)) is not None:
            return True
        return conn.scalar(sa.select(t.agents.c.id).where(t.agents.c.organization_slug == org).limit(1)) is not None

    @staticmethod
    def ensure_in(conn: Connection, org: str, now: datetime, by: str | None = None) -> bool:
        """Create the organization unless it has a row; True when created now."""
        if conn.scalar(sa.select(_O.c.slug).where(_O.c.slug == org)) is not None:
            return False
        conn.execute(_O.insert().values(slug=org, created_at=now, created_by=by))
        return True

    @staticmethod
    def role_in(conn: Connection, org: str, user: str) -> str | None:
        """The user's role in the organization, or None."""
        return conn.scalar(sa.select(_M.c.role).where((_M.c.org_slug == org) & (_M.c.user_name == user)))

    @staticmethod
    def has_admins_in(conn: Connection, org: str) -> bool:
        """Some member of the organization is an admin."""
        query = sa.select(_M.c.user_name).where((_M.c.org_slug == org) & (_M.c.role == "admin")).limit(1)
        return conn.scalar(query) is not None

    @staticmethod
    def user_exists_in(conn: Connection, user: str) -> bool:
        """A user of that name exists."""
        return conn.scalar(sa.select(et.users.c.name).where(et.users.c.name == user)) is not None

    @staticmethod
    def set_role_in(conn: Connection, org: str, user: str, role: str, now: datetime, by: str | None) -> str | None:
        """Give the user `role` in the organization (which must have a row); returns the role before."""
        before = OrgRows.role_in(conn, org, user)
        key = (_M.c.org_slug == org) & (_M.c.user_name == user)
        if before is None:
            conn.execute(_M.insert().values(org_slug=org, user_name=user, role=role, granted_at=now, granted_by=by))
        elif before != role:
            conn.execute(_M.update().where(key).values(role=role, granted_at=now, granted_by=by))
        return before

    @staticmethod
    def remove_in(conn: Connection, org: str, user: str) -> str | None:
        """Take the user's role in the organization away; returns the role it had (None: none)."""
        before = OrgRows.role_in(conn, org, user)
        if before is not None:
            conn.execute(_M.delete().where((_M.c.org_slug == org) & (_M.c.user_name == user)))
        return before

    @staticmethod
    def member_in(conn: Connection, org: str, user: str) -> MemberRow | None:
        """One membership, or None."""
        row = conn.execute(sa.select(_M).where((_M.c.org_slug == org) & (_M.c.user_name == user))).first()
        return None if row is None else _member(row)

    # -- reads ---------------------------------------------------------------------------------------

    async def orgs(self, *, member: str | None = None) -> list[OrgRow]:
        """Every organization (or those `member` has a role in), by name, with its counts."""
        members = (
            sa.select(
                _M.c.org_slug,
                sa.func.count().label("n"),
                sa.func.sum(sa.case((_M.c.role == "admin", 1), else_=0)).label("admins"),
            )
            .group_by(_M.c.org_slug)
            .subquery()
        )
        agents = (
            sa.select(t.agents.c.organization_slug.label("org"), sa.func.count().label("n"))
            .group_by(t.agents.c.organization_slug)
            .subquery()
        )
        query = (
            sa.select(_O, members.c.n.label("members"), members.c.admins, agents.c.n.label("agents"))
            .outerjoin(members, members.c.org_slug == _O.c.slug)
            .outerjoin(agents, agents.c.org == _O.c.slug)
            .order_by(_O.c.slug)
        )
        if member is not None:
            query = query.where(_O.c.slug.in_(sa.select(_M.c.org_slug).where(_M.c.user_name == member)))
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        return [
            OrgRow(
                r.slug, as_utc(r.created_at), r.created_by, int(r.members or 0), int(r.admins or 0), int(r.agents or 0)
            )
            for r in rows
        ]

    async def members(self, org: str) -> list[MemberRow]:
        """The organization's members: admins first, then by name."""
        rank = sa.case((_M.c.role == "admin", 0), (_M.c.role == "editor", 1), else_=2)
        query = sa.select(_M).where(_M.c.org_slug == org).order_by(rank, _M.c.user_name)
        async with self.db.begin() as conn:
            return [_member(r) for r in (await conn.execute(query)).all()]

    async def roles_of(self, user: str) -> dict[str, str]:
        """The user's role in each organization it belongs to."""
        async with self.db.begin() as conn:
            rows = (await conn.execute(sa.select(_M.c.org_slug, _M.c.role).where(_M.c.user_name == user))).all()
        return {r.org_slug: r.role for r in rows}


__all__ = ["MemberRow", "OrgRow", "OrgRows"]
