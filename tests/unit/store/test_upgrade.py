"""Alembic migrations: a fresh store ends in the shape `tables.py` declares, and a store written by
the release before Alembic (kept under tests/fixtures/) upgrades in place with every row kept."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from _support.repo import REPO_ROOT
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from toolagent.engine.audit import AuditLog
from toolagent.store import open_store
from toolagent.store.db import Database
from toolagent.store.migrations import LEGACY_TABLE
from toolagent.store.tables import metadata

pytestmark = pytest.mark.anyio
FIXTURES = REPO_ROOT / "tests" / "fixtures"


def _schema_drift(conn: sa.Connection) -> list[Any]:
    """What differs between the database and `tables.py` (the legacy version table and
    procrastinate's job queue, applied frozen on PostgreSQL by revision 0007, aside)."""

    def include(obj: Any, name: str | None, kind: str, reflected: bool, compare_to: Any) -> bool:
        return not (kind == "table" and (name == LEGACY_TABLE or (name or "").startswith("procrastinate_")))

    context = MigrationContext.configure(conn, opts={"include_object": include, "compare_type": True})
    return compare_metadata(context, metadata)


#: Tables added after the release the fixtures come from (revision 8: organizations and roles;
#: revision 9: the raw inputs of queued runs and calls; revision 10: the principals' change counter).
NEWER_TABLES = ("organizations", "org_members", "queued_inputs", "principal_epoch")


def _row_counts(conn: sa.Connection) -> dict[str, int]:
    present = set(sa.inspect(conn).get_table_names())  # a table added since the store was written is absent
    return {
        name: conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0
        for name, table in metadata.tables.items()
        if name in present
    }


def _index_conditions(conn: sa.Connection) -> dict[str, str | None]:
    """Each index of `executions` (its key's own aside) and its condition, None for a whole index;
    `compare_metadata` does not compare conditions."""
    if conn.dialect.name == "sqlite":
        rows = conn.exec_driver_sql(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions' AND sql IS NOT NULL"
        ).all()
    else:
        rows = [
            r
            for r in conn.exec_driver_sql(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'executions'"
            ).all()
            if r[0] != "executions_pkey"
        ]
    return {name: sql.split(" WHERE ", 1)[1].strip().strip("()") if " WHERE " in sql else None for name, sql in rows}


#: `executions`' indexes and the gist of each one's condition (revision 11: the history indexes
#: hold ended executions only, the run index BUILD steps only).
INDEX_CONDITIONS = {
    **{
        name: "queued"
        for name in (
            "ix_executions_user_started",
            "ix_executions_user_tool",
            "ix_executions_user_category",
            "ix_executions_user_status",
            "ix_executions_started",
            "ix_executions_tool",
            "ix_executions_category",
        )
    },
    "ix_executions_tool_duration": "duration_ms IS NOT NULL",
    "ix_executions_run": "run_id IS NOT NULL",
    "ix_executions_status": None,
}


async def _check_index_conditions(db: Database) -> None:
    async with db.begin() as conn:
        conditions = await conn.run_sync(_index_conditions)
    assert set(conditions) == set(INDEX_CONDITIONS)
    for name, gist in INDEX_CONDITIONS.items():
        assert (conditions[name] is None) if gist is None else (gist in (conditions[name] or "")), (
            name,
            conditions[name],
        )


async def _inspect(db: Database) -> tuple[list[Any], dict[str, int], bool]:
    async with db.begin() as conn:
        drift = await conn.run_sync(_schema_drift)
        counts = await conn.run_sync(_row_counts)
        has_legacy = await conn.run_sync(lambda sync: sa.inspect(sync).has_table(LEGACY_TABLE))
    return drift, counts, has_legacy


async def test_a_fresh_store_ends_in_the_declared_shape(db_url: str) -> None:
    db = Database(db_url)
    try:
        assert await db.migrate() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
        drift, counts, has_legacy = await _inspect(db)
        assert drift == []
        await _check_index_conditions(db)
        assert set(counts.values()) == {0} and not has_legacy
        assert await db.schema_version() == 11
        assert await db.migrate() == []
    finally:
        await db.dispose()


async def _check_upgraded(url: str) -> None:
    db = Database(url)
    try:
        # The release before Alembic left every table filled; none is empty going in.
        _, before, _ = await _inspect(db)
        assert 0 not in before.values(), before
        assert not set(NEWER_TABLES) & set(before)
        assert await db.migrate() == [6, 7, 8, 9, 10, 11]  # stamped at version 5: the revisions after it only
        drift, after, has_legacy = await _inspect(db)
        assert drift == []
        await _check_index_conditions(db)
        # Every row kept; the organization of the stored agents now exists, with no members (only
        # global admins change its agents until an operator grants roles).
        assert after == {**before, "organizations": 1, "org_members": 0, "queued_inputs": 0, "principal_epoch": 0}
        assert has_legacy  # left in place for the release before, which still reads it
        assert await db.schema_version() == 11
    finally:
        await db.dispose()
    async with open_store(url) as store:
        assert [a.ref for a in await store.agents.list_agents()] == ["demo/supabase-agent"]
        runs = await store.runs.list_runs()
        assert [r.status for r in runs] == ["success"]
        deliverable = await store.runs.get_deliverable(runs[0].deliverable_id or "")
        assert deliverable.content
        assert (await AuditLog(store.db).verify()).ok
        orgs = await store.orgs.orgs()
        assert [(o.slug, o.members, o.agents, o.created_by) for o in orgs] == [("demo", 0, 1, None)]


async def test_a_sqlite_store_of_the_previous_release_upgrades_in_place(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(FIXTURES / "store_v5.sqlite", path)
    await _check_upgraded(f"sqlite+aiosqlite:///{path}")


async def test_a_postgres_store_of_the_previous_release_upgrades_in_place(pg_url: str) -> None:
    import psycopg

    dump = (FIXTURES / "store_v5.pg.sql").read_text()
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(dump.encode())
    await _check_upgraded(pg_url)


def test_the_head_revision_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from toolagent.store.migrations import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()


async def test_the_current_revision_is_read_as_alembic_reads_it(db_url: str) -> None:
    from toolagent.store.migrations import current_revision

    def both(conn: sa.Connection) -> tuple[str | None, str | None]:
        return current_revision(conn), MigrationContext.configure(conn).get_current_revision()

    db = Database(db_url)
    try:
        for target in (None, "0003", "head"):
            if target is not None:
                await db.migrate(target)
            async with db.begin() as conn:
                ours, alembics = await conn.run_sync(both)
            assert ours == alembics and (ours is None) == (target is None), target
    finally:
        await db.dispose()


def test_opening_a_store_at_head_does_not_load_alembic(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = (
        "import anyio, sys\n"
        "from toolagent.store import open_store\n"
        "async def main():\n"
        f"    async with open_store({str(tmp_path / 's.db')!r}): pass\n"
        "anyio.run(main)\n"  # the first opening migrates, with Alembic
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic') != [])\n"
        "for name in [m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')]: del sys.modules[name]\n"
        "anyio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["True", "[]"], out
