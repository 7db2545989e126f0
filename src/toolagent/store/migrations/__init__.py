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
import re
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.config import Config

#: The folder holding `env.py` and `versions/`, shipped inside the package.
SCRIPT_LOCATION = Path(__file__).resolve().parent
#: The table the migrator before Alembic recorded applied versions in.
LEGACY_TABLE = "schema_migrations"
#: Where Alembic records the revision a database is at (its default).
VERSION_TABLE = "alembic_version"
#: A revision file's name: its revision id (the next number, four digits), then what it does.
_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


def alembic_config(conn: sa.Connection | None = None) -> Config:
    """An Alembic configuration over the packaged revisions, bound to `conn` when given."""
    from alembic.config import Config

    config = Config(attributes={"connection": conn} if conn is not None else {})
    config.set_main_option("script_location", str(SCRIPT_LOCATION).replace("%", "%%"))
    return config


def revision_number(revision: str | None) -> int:
    """`"0005"` -> 5; `None` (nothing applied) -> 0."""
    return int(revision) if revision else 0


def current_revision(conn: sa.Connection) -> str | None:
    """The revision the database is at, or `None` when no revision was applied.

    Read from Alembic's version table (whether it exists, then its row) without importing Alembic:
    every command opens the store, and Alembic with its revision files takes longer to load than
    the command takes to run.
    """
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    version = sa.table(VERSION_TABLE, sa.column("version_num", sa.String))
    rows = conn.execute(sa.select(version.c.version_num)).scalars().all()
    if len(rows) > 1:  # branches: none are shipped, but let Alembic say what it makes of them
        from alembic.runtime.migration import MigrationContext

        return MigrationContext.configure(conn).get_current_revision()
    return rows[0] if rows else None


@functools.cache
def head_revision() -> str:
    """The newest revision shipped: the highest-numbered file in `versions/` (a test checks that
    Alembic's own reading of the revisions agrees)."""
    numbers = [m.group(1) for p in (SCRIPT_LOCATION / "versions").iterdir() if (m := _REVISION_FILE.match(p.name))]
    assert numbers, "no migration revisions are shipped"
    return max(numbers)


def upgrade(conn: sa.Connection, target: str = "head") -> list[int]:
    """Bring the database on `conn` to `target` inside the caller's transaction.

    Returns:
        The revision numbers applied now, oldest first (empty when already there).
    """
    # Every command opens the store: a store already at head costs one read of its version, not
    # a run of Alembic's environment (several times slower).
    if target == "head" and current_revision(conn) == head_revision():
        return []
    from alembic import command
    from alembic.script import ScriptDirectory

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
        from alembic import command

        command.stamp(config, f"{int(version):04d}")
