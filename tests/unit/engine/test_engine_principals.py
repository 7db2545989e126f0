"""Users (levels, plans), the CLI's local user, and API keys: created once, stored hashed, scoped, revoked."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
    key, raw = await principals.create_key("bob", scopes=["agent:execute:file", "agent:execute:file", "agent:execute:web"],
                                           label="ci")
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
