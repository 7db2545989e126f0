"""Store verbs for agent records."""

from __future__ import annotations

from typing import Any, Literal

import sqlalchemy as sa

from ..agents.models import AgentRecord
from ..errors import NotFound
from . import tables as t
from .db import Database, as_utc, utcnow

UpsertOutcome = Literal["inserted", "updated", "unchanged"]

_CONTENT_FIELDS = (
    "display_name", "agent_type", "mode_profile", "status", "yaml", "description", "context",
    "plan_structure", "deliverable_structure", "io_schema", "config", "version",
)


def _to_record(row: Any) -> AgentRecord:
    m = row._mapping
    data = {k: m[k] for k in ("organization_slug", "slug", *_CONTENT_FIELDS)}
    data["created_at"] = as_utc(m["created_at"])
    data["updated_at"] = as_utc(m["updated_at"])
    return AgentRecord.model_validate(data)


class AgentStore:
    """Insert, update, find and delete `agents` rows."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def upsert_agent(self, record: AgentRecord) -> tuple[UpsertOutcome, AgentRecord]:
        """Insert or update by (organization_slug, slug); unchanged content writes nothing."""
        values = {k: getattr(record, k) for k in _CONTENT_FIELDS}
        key = (t.agents.c.organization_slug == record.organization_slug) & (t.agents.c.slug == record.slug)
        async with self.db.begin() as conn:
            if not self.db.is_sqlite:
                # Serialize concurrent upserts of the same key without relying on dialect-specific ON CONFLICT.
                await conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": record.ref})
            current = (await conn.execute(sa.select(t.agents).where(key))).first()
            now = utcnow()
            if current is None:
                await conn.execute(t.agents.insert().values(
                    organization_slug=record.organization_slug, slug=record.slug, created_at=now, updated_at=now, **values
                ))
                outcome: UpsertOutcome = "inserted"
            elif all(current._mapping[k] == v for k, v in values.items()):
                outcome = "unchanged"
            else:
                await conn.execute(t.agents.update().where(key).values(updated_at=now, **values))
                outcome = "updated"
            row = (await conn.execute(sa.select(t.agents).where(key))).one()
        return outcome, _to_record(row)

    async def get_agent(self, org: str, slug: str) -> AgentRecord:
        """One record.

        Raises:
            NotFound: no such agent.
        """
        async with self.db.begin() as conn:
            row = (await conn.execute(
                sa.select(t.agents).where((t.agents.c.organization_slug == org) & (t.agents.c.slug == slug))
            )).first()
        if row is None:
            raise NotFound(f"agent '{org}/{slug}' not found: seed it with `toolagent seed` or `toolagent agents upsert FILE`")
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
        async with self.db.begin() as conn:
            result = await conn.execute(
                t.agents.delete().where((t.agents.c.organization_slug == org) & (t.agents.c.slug == slug))
            )
        if result.rowcount == 0:
            raise NotFound(f"agent '{org}/{slug}' not found")
