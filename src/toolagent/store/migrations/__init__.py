"""Versioned schema migrations, run by Alembic from the revisions in `versions/`.

Each revision freezes the table shapes it creates (no revision imports `tables.py`), so
replaying history on an empty database always ends in the shape `tables.py` declares. Add a
change as a new revision file with the next number; never edit one that has shipped.

Stores made before Alembic kept their version in a `schema_migrations` table (versions 1 to 5,
the same steps as revisions 0001 to 0005); the first upgrade stamps such a store at its version
and goes on from there, leaving that table in place.
"""

from __future__ import annotations

import functools
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

#: The folder holding `env.py` and `versions/`, shipped inside the package.
SCRIPT_LOCATION = Path(__file__).resolve().parent
#: The table the migrator before Alembic recorded applied versions in.
LEGACY_TABLE = "schema_migrations"


def alembic_config(conn: sa.Connection | None = None) -> Config:
    """An Alembic configuration over the packaged revisions, bound to `conn` when given."""
    config = Config(attributes={"connection": conn} if conn is not None else {})
    config.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    return config


def revision_number(revision: str | None) -> int:
    """`"0005"` -> 5; `None` (nothing applied) -> 0."""
    return int(revision) if revision else 0


def current_revision(conn: sa.Connection) -> str | None:
    """The revision the database is at, or `None` when no revision was applied."""
    return MigrationContext.configure(conn).get_current_revision()


@functools.cache
def head_revision() -> str:
    """The newest revision shipped (read from `versions/` once per process)."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "no migration revisions are shipped"
    return head


def upgrade(conn: sa.Connection, target: str = "head") -> list[int]:
    """Bring the database on `conn` to `target` inside the caller's transaction.

    Returns:
        The revision numbers applied now, oldest first (empty when already there).
    """
    # Every command opens the store: a store already at head costs one read of its version, not
    # a run of Alembic's environment (several times slower).
    if target == "head" and current_revision(conn) == head_revision():
        return []
    config = alembic_config(conn)
    _adopt_legacy(conn, config)
    before = current_revision(conn)
    command.upgrade(config, target)
    after = current_revision(conn)
    if after == before:
        return []
    script = ScriptDirectory.from_config(config)
    applied = [revision_number(s.revision) for s in script.iterate_revisions(after, before)]
    return sorted(applied)


def _adopt_legacy(conn: sa.Connection, config: Config) -> None:
    """Stamp a store made by the migrator before Alembic at the version it recorded."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(LEGACY_TABLE) or current_revision(conn) is not None:
        return
    legacy = sa.table(LEGACY_TABLE, sa.column("version", sa.Integer))
    version = conn.scalar(sa.select(sa.func.max(legacy.c.version)))
    if version:
        command.stamp(config, f"{int(version):04d}")
