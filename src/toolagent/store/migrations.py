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


MIGRATIONS: list[Migration] = [
    Migration(1, "agents", _create(t.agents)),
    Migration(2, "runs, steps and deliverables", _create(t.runs, t.run_steps, t.deliverables)),
    Migration(3, "engine: principals, keys, executions, limits", _create(*et.ENGINE_TABLES)),
    Migration(4, "audit log", _create(at.audit_log, at.audit_head)),
]
