"""Store verbs for agent records."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa

from ..agents.models import AgentRecord
from ..errors import NotFound
from ..model.times import as_utc
from . import tables as t
from .db import Connection, Database, utcnow
from .orgs import OrgRows

UpsertOutcome = Literal["inserted", "updated", "unchanged"]

_CONTENT_FIELDS = (
    "display_name",
    "agent_type",
    "mode_profile",
    "status",
    "yaml",
    "description",
    "context",
    "plan_structure",
    "deliverable_structure",
    "io_schema",
    "config",
    "version",
)


def _to_record(row: Any) -> AgentRecord:
    m = row._mapping
    data = {k: m[k] for k in ("organization_slug", "slug", *_CONTENT_FIELDS)}
    data["created_at"] = as_utc(m["created_at"])
    data["updated_at"] = as_utc(m["updated_at"])
    return AgentRecord.model_validate(data)


def _key(org: str, slug: str) -> Any:
    return (t.agents.c.organization_slug == org) & (t.agents.c.slug == slug)


class AgentStore:
    """Insert, update, find and delete `agents` rows.

    Every write creates the agent's organization's row when it has none (no members: global
    admins administer it). `engine.orgs` adds the role check and the audit row around the
    `..._in` verbs, in their transaction; the async verbs here are the unchecked operator path.
    """

    def __init__(self, db: Database) -> None:
        self.db = db
        self.orgs = OrgRows(db)

    @staticmethod
    def get_in(conn: Connection, org: str, slug: str) -> AgentRecord | None:
        """One record inside the caller's transaction, or None."""
        row = conn.execute(sa.select(t.agents).where(_key(org, slug))).first()
        return None if row is None else _to_record(row)

    @staticmethod
    def upsert_in(conn: Connection, record: AgentRecord, now: datetime) -> tuple[UpsertOutcome, AgentRecord]:
        """`upsert_agent` inside the caller's transaction (which holds the organization's lock)."""
        values = {k: getattr(record, k) for k in _CONTENT_FIELDS}
        key = _key(record.organization_slug, record.slug)
        current = conn.execute(sa.select(t.agents).where(key)).first()
        if current is None:
            OrgRows.ensure_in(conn, record.organization_slug, now)
            conn.execute(
                t.agents.insert().values(
                    organization_slug=record.organization_slug,
                    slug=record.slug,
                    created_at=now,
                    updated_at=now,
                    **values,
                )
            )
            outcome: UpsertOutcome = "inserted"
        elif all(current._mapping[k] == v for k, v in values.items()):
            outcome = "unchanged"
        else:
            conn.execute(t.agents.update().where(key).values(updated_at=now, **values))
            outcome = "updated"
        return outcome, _to_record(conn.execute(sa.select(t.agents).where(key)).one())

    @staticmethod
    def delete_in(conn: Connection, org: str, slug: str) -> bool:
        """Remove a record inside the caller's transaction; False when there was none."""
        return bool(conn.execute(t.agents.delete().where(_key(org, slug))).rowcount)

    async def upsert_agent(self, record: AgentRecord) -> tuple[UpsertOutcome, AgentRecord]:
        """Insert or update by (organization_slug, slug); unchanged content writes nothing."""

        def write(conn: Connection) -> tuple[UpsertOutcome, AgentRecord]:
            # Concurrent upserts of one key (or one organization's first agents) take turns.
            self.orgs.lock_in(conn, record.organization_slug)
            return self.upsert_in(conn, record, utcnow())

        return await self.db.write(write)

    async def get_agent(self, org: str, slug: str) -> AgentRecord:
        """One record.

        Raises:
            NotFound: no such agent.
        """
        async with self.db.begin() as conn:
            row = (
                await conn.execute(
                    sa.select(t.agents).where((t.agents.c.organization_slug == org) & (t.agents.c.slug == slug))
                )
            ).first()
        if row is None:
            raise NotFound(
                f"agent '{org}/{slug}' not found: seed it with `toolagent seed` or `toolagent agents upsert FILE`"
            )
        return _to_record(row)

    async def list_agents(self, org: str | None = None) -> list[AgentRecord]:
        """Every record, optionally of one organization, ordered by org and slug."""
        query = sa.select(t.agents).order_by(t.agents.c.organization_slug, t.agents.c.slug)
        if org:
            query = query.where(t.agents.c.organization_slug == org)
        async with self.db.begin() as conn:
            rows = (await conn.execute(query)).all()
        return [_to_record(r) for r in rows]

    async def delete_agent(self, org: str, slug: str) -> None:
        """Remove a record.

        Raises:
            NotFound: no such agent.
        """

        def write(conn: Connection) -> bool:
            self.orgs.lock_in(conn, org)
            return self.delete_in(conn, org, slug)

        if not await self.db.write(write):
            raise NotFound(f"agent '{org}/{slug}' not found")
