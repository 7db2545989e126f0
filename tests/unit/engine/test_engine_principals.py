"""Users (levels, plans), the CLI's local user, and API keys: created once, stored hashed, scoped, revoked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
import sqlalchemy as sa

from toolagent.engine import EngineConfig
from toolagent.engine.principals import KEY_PREFIX, Principals, Unauthenticated, hash_key
from toolagent.errors import NotFound, UsageError
from toolagent.store import open_store
from toolagent.store.engine_tables import api_keys

pytestmark = pytest.mark.anyio


@pytest.fixture
async def principals(db_url: str) -> AsyncIterator[Principals]:
    async with open_store(db_url) as store:
        yield Principals(store.db, EngineConfig())


async def test_users(principals: Principals) -> None:
    bob = await principals.add_user("bob", plan="team")
    assert (bob.name, bob.level, bob.plan) == ("bob", "execute_advanced", "team")  # the plan's level
    alice = await principals.add_user("alice", level="admin")
    assert (alice.level, alice.plan, alice.is_admin) == ("admin", "free", True)
    assert [u.name for u in await principals.list_users()] == ["alice", "bob"]
    assert (await principals.set_level("bob", "view_only")).level == "view_only"
    assert (await principals.set_plan("bob", "starter")).plan == "starter"
    assert (await principals.get_user("bob")).level == "view_only"
    with pytest.raises(UsageError, match="user 'bob' already exists"):
        await principals.add_user("bob")
    with pytest.raises(UsageError, match="unknown permission level 'root': use one of view_only, execute_basic"):
        await principals.set_level("bob", "root")
    with pytest.raises(UsageError, match="unknown plan 'gold'"):
        await principals.add_user("carol", plan="gold")
    with pytest.raises(UsageError, match="invalid user name"):
        await principals.add_user("two words")
    with pytest.raises(NotFound, match="user 'nobody' not found: add it with `toolagent users add nobody"):
        await principals.set_plan("nobody", "free")


async def test_local_user_is_created_on_first_use(principals: Principals, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    me = await principals.resolve_cli_user(None)
    assert (me.name, me.level, me.plan) == ("ops", "execute_basic", "enterprise")
    await principals.set_level("ops", "admin")
    assert (await principals.resolve_cli_user(None)).level == "admin"  # found, not recreated
    with pytest.raises(NotFound):
        await principals.resolve_cli_user("ghost")

    def broken() -> str:
        raise OSError("no passwd entry")

    monkeypatch.setattr("getpass.getuser", broken)
    assert (await principals.resolve_cli_user(None)).name == "local"


async def test_api_keys(principals: Principals) -> None:
    await principals.add_user("bob", level="execute_basic")
    key, raw = await principals.create_key(
        "bob", scopes=["agent:execute:file", "agent:execute:file", "agent:execute:web"], label="ci"
    )
    assert raw.startswith(KEY_PREFIX) and len(raw) == 46 and key.prefix == raw[:10]
    assert key.scopes == ("agent:execute:file", "agent:execute:web") and key.active
    principal, found = await principals.authenticate_key(raw)
    assert principal.name == "bob" and found.id == key.id and found.label == "ci"
    # Only the hash is stored.
    async with principals.db.begin() as conn:
        stored = (await conn.execute(sa.select(api_keys.c.key_hash))).scalars().all()
    assert stored == [hash_key(raw)] and raw not in str(stored)

    default, _ = await principals.create_key("bob")
    assert default.scopes == ("*",)
    assert [k.id for k in await principals.list_keys("bob")] == [key.id, default.id]
    assert await principals.list_keys("nobody") == []

    revoked = await principals.revoke_key(key.id)
    assert revoked.revoked_at is not None and not revoked.active
    assert (await principals.revoke_key(key.id)).revoked_at == revoked.revoked_at
    with pytest.raises(Unauthenticated, match=f"API key {key.id} was revoked") as info:
        await principals.authenticate_key(raw)
    assert info.value.code == "UNAUTHORIZED"
    with pytest.raises(Unauthenticated, match="unknown API key"):
        await principals.authenticate_key(KEY_PREFIX + "x" * 43)
    with pytest.raises(Unauthenticated, match="not an API key"):
        await principals.authenticate_key("hunter2")
    with pytest.raises(UsageError, match="invalid scope 'agent:delete:file'"):
        await principals.create_key("bob", scopes=["agent:delete:file"])
    with pytest.raises(NotFound):
        await principals.create_key("nobody")
    with pytest.raises(NotFound, match="API key 'key_nope' not found"):
        await principals.revoke_key("key_nope")


# -- the key cache --------------------------------------------------------------------------------


async def _change_reached(principals: Principals, before: int | None) -> None:
    """Wait for the change another handle committed to reach this one: at once on SQLite (the file
    changed); on PostgreSQL when its NOTIFY arrives, which the server sends alongside the commit's
    answer, so on a loaded machine it may come a little after it."""
    with anyio.fail_after(10):
        while principals._changes.token() == before:
            assert not principals.db.is_sqlite, "SQLite sees another connection's commit at once"
            await anyio.sleep(0.002)


async def test_keys_are_cached_until_another_handle_narrows_them(
    principals: Principals, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resolved key is served from memory; a revocation, level or plan change made through another
    store handle (as by another process) is seen on the very next lookup."""
    await principals.add_user("bob", level="admin", plan="team")
    key, raw = await principals.create_key("bob")
    other_key, other_raw = await principals.create_key("bob")
    reads: list[str] = []
    lookup = principals.rows.key_by_hash

    async def counted(key_hash: str) -> object:
        reads.append(key_hash)
        return await lookup(key_hash)

    monkeypatch.setattr(principals.rows, "key_by_hash", counted)
    try:
        assert (await principals.authenticate_key(raw))[0].level == "admin"
        assert (await principals.authenticate_key(raw))[1].id == key.id
        assert reads == [hash_key(raw)]  # the second lookup read nothing

        async with open_store(principals.db.url) as other_store:
            other = Principals(other_store.db, EngineConfig())
            seen = principals._changes.token()
            await other.set_level("bob", "execute_basic")
            await _change_reached(principals, seen)
            principal, _ = await principals.authenticate_key(raw)
            assert principal.level == "execute_basic" and len(reads) == 2
            seen = principals._changes.token()
            await other.set_plan("bob", "starter")
            await _change_reached(principals, seen)
            assert (await principals.authenticate_key(raw))[0].plan == "starter"
            await principals.authenticate_key(other_raw)
            seen = principals._changes.token()
            await other.revoke_key(key.id)
            await _change_reached(principals, seen)
            with pytest.raises(Unauthenticated, match=f"API key {key.id} was revoked"):
                await principals.authenticate_key(raw)
            # Revoking one key drops every cached key: the other is read again, still valid.
            before = len(reads)
            assert (await principals.authenticate_key(other_raw))[1].id == other_key.id
            assert len(reads) == before + 1
            # Changes that narrow nothing (a new key, revoking a revoked key) keep the cache.
            await other.create_key("bob")
            await other.revoke_key(key.id)
            await principals.authenticate_key(other_raw)
            assert len(reads) == before + 1
    finally:
        principals.close()


async def test_a_change_during_a_lookup_keeps_its_result_out_of_the_cache(
    principals: Principals, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup racing a revocation may answer with what it read, but must not cache it: the next
    request reads the key again and finds it revoked."""
    await principals.add_user("bob", level="execute_basic")
    key, raw = await principals.create_key("bob")
    lookup = principals.rows.key_by_hash
    async with open_store(principals.db.url) as other_store:
        other = Principals(other_store.db, EngineConfig())

        async def racing(key_hash: str) -> object:
            row = await lookup(key_hash)
            await other.revoke_key(key.id)  # committed after the row was read
            return row

        monkeypatch.setattr(principals.rows, "key_by_hash", racing)
        try:
            seen = principals._changes.token()
            assert (await principals.authenticate_key(raw))[1].id == key.id
            monkeypatch.setattr(principals.rows, "key_by_hash", lookup)
            await _change_reached(principals, seen)  # the next request is one the change reached
            with pytest.raises(Unauthenticated, match="was revoked"):
                await principals.authenticate_key(raw)
        finally:
            principals.close()
