"""The agents store on SQLite and PostgreSQL: upsert by (org, slug), idempotent seeding, migrations."""

from __future__ import annotations

import pytest
from _support.repo import REPO_ROOT
from alembic.script import ScriptDirectory

from toolagent.agents import load_path
from toolagent.errors import NotFound
from toolagent.seeding import seed_files
from toolagent.store import open_store
from toolagent.store.migrations import alembic_config, revision_number

pytestmark = pytest.mark.anyio
SEED = REPO_ROOT / "seeds" / "demo_supabase_agent.json"


async def test_seeding_twice_leaves_one_row(db_url: str) -> None:
    async with open_store(db_url) as store:
        assert await seed_files(store, [SEED]) == [("demo/supabase-agent", "inserted")]
        assert await seed_files(store, [SEED]) == [("demo/supabase-agent", "unchanged")]
        records = await store.agents.list_agents("demo")
    assert [r.ref for r in records] == ["demo/supabase-agent"]


async def test_upsert_updates_changed_content_and_keeps_created_at(db_url: str) -> None:
    [agent] = load_path(SEED)
    async with open_store(db_url) as store:
        _, first = await store.agents.upsert_agent(agent.record)
        outcome, second = await store.agents.upsert_agent(agent.record.model_copy(update={"status": "inactive"}))
        assert outcome == "updated"
        assert second.status == "inactive"
        assert second.created_at == first.created_at
        assert second.updated_at is not None and second.updated_at >= first.updated_at
        assert len(await store.agents.list_agents()) == 1


async def test_record_round_trips_all_fields(db_url: str) -> None:
    [agent] = load_path(SEED)
    rec = agent.record.model_copy(update={"io_schema": {"type": "object"}, "config": {"a": [1, 2]}, "context": "ctx"})
    async with open_store(db_url) as store:
        await store.agents.upsert_agent(rec)
        got = await store.agents.get_agent("demo", "supabase-agent")
    assert got.model_dump(exclude={"created_at", "updated_at"}) == rec.model_dump(exclude={"created_at", "updated_at"})
    assert got.created_at is not None and got.created_at.tzinfo is not None


async def test_missing_agent_is_not_found_with_hint(db_url: str) -> None:
    async with open_store(db_url) as store:
        with pytest.raises(NotFound) as info:
            await store.agents.get_agent("demo", "nope")
        with pytest.raises(NotFound):
            await store.agents.delete_agent("demo", "nope")
    assert "toolagent seed" in info.value.message


async def test_migrations_are_versioned_and_reapplied_never(db_url: str) -> None:
    async with open_store(db_url) as store:
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert await store.db.schema_version() == revision_number(head) == 11
        await seed_files(store, [SEED])
        assert await store.db.migrate() == []
    async with open_store(db_url) as store:
        assert [r.ref for r in await store.agents.list_agents()] == ["demo/supabase-agent"]


async def test_delete_agent(db_url: str) -> None:
    async with open_store(db_url) as store:
        await seed_files(store, [SEED])
        await store.agents.delete_agent("demo", "supabase-agent")
        assert await store.agents.list_agents() == []
