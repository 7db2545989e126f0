"""Versioned schema migrations. Each one is applied once, in order, inside a transaction.

Append new migrations to `MIGRATIONS`; never edit one that has shipped. The version applied
last is kept in `schema_migrations`, so an existing database only runs what is new.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from . import audit_tables as at
from . import engine_tables as et
from . import tables as t


@dataclass(frozen=True)
class Migration:
    """One schema step."""

    version: int
    name: str
    apply: Callable[[sa.Connection], None]


def _create(*tables: sa.Table) -> Callable[[sa.Connection], None]:
    # These create the tables as `tables.py` declares them today. A later migration that alters
    # one of them must first freeze that table's earlier shape here, so replaying history on an
    # empty database still ends in today's shape.
    def apply(conn: sa.Connection) -> None:
        for table in tables:
            table.create(conn)

    return apply


def _runs_v2() -> sa.Table:
    """`runs` as migration 2 created it, before the owner columns of migration 5."""
    return sa.Table(
        "runs", sa.MetaData(),
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("organization_slug", sa.String(200)),
        sa.Column("agent_slug", sa.String(200), nullable=False),
        sa.Column("agent_version", sa.String(50)),
        sa.Column("user_id", sa.String(200)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("execution_mode", sa.String(20), nullable=False),
        sa.Column("stop_on_error", sa.Boolean, nullable=False),
        sa.Column("payload", t.JSON),
        sa.Column("overrides", t.JSON),
        sa.Column("error", sa.Text),
        sa.Column("started_at", t.TS, nullable=False),
        sa.Column("ended_at", t.TS),
        sa.Column("duration_ms", sa.Float),
        sa.Column("deliverable_id", sa.String(64)),
        sa.Index("ix_runs_agent", "organization_slug", "agent_slug", "started_at"),
        sa.Index("ix_runs_started", "started_at"),
    )


def _add_run_owner(conn: sa.Connection) -> None:
    for name, kind in (("owner_pid", "INTEGER"), ("owner_host", "VARCHAR(255)"), ("owner_boot", "VARCHAR(64)")):
        conn.execute(sa.text(f"ALTER TABLE runs ADD COLUMN {name} {kind}"))


MIGRATIONS: list[Migration] = [
    Migration(1, "agents", _create(t.agents)),
    Migration(2, "runs, steps and deliverables", _create(_runs_v2(), t.run_steps, t.deliverables)),
    Migration(3, "engine: principals, keys, executions, limits", _create(*et.ENGINE_TABLES)),
    Migration(4, "audit log", _create(at.audit_log, at.audit_head)),
    Migration(5, "runs: owner process", _add_run_owner),
]
