"""The keyed audit chain on SQLite and PostgreSQL: someone who can write the store but does not
hold the audit key cannot rewrite the chain so that it verifies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from toolagent.engine.audit import AuditEntry, AuditLog
from toolagent.engine.audit_chain import canonical_json, check_records, row_hash
from toolagent.engine.audit_key import audit_key, keyed_genesis, sign_head
from toolagent.errors import UsageError
from toolagent.settings import Settings
from toolagent.store import Store, open_store
from toolagent.store.audit import GENESIS_HASH

pytestmark = pytest.mark.anyio

KEY = b"a key kept outside the store"


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    async with open_store(db_url) as s:
        yield s


async def fill(log: AuditLog, n: int) -> None:
    for i in range(n):
        await log.append(
            AuditEntry(
                principal="alice", tool="file_read", decision="allow", arguments={"i": i}, execution_id=f"exec_{i}"
            )
        )


async def raw(store: Store, sql: str, **params: object) -> None:
    async with store.db.begin() as conn:
        await conn.execute(sa.text(sql), params)


async def rehash_from(store: Store, log: AuditLog, seq: int, key: bytes | None) -> None:
    """What an attacker with write access does: recompute every hash from `seq` on, and the head."""
    records = await log.query(limit=1000)
    prev = records[seq - 2].hash if seq > 1 else records[0].prev_hash
    for rec in records[seq - 1 :]:
        fields = {**rec.to_json(), "arguments": canonical_json(rec.arguments), "recorded_at": rec.recorded_at}
        digest = row_hash(fields, prev, key)
        await raw(store, "UPDATE audit_log SET prev_hash = :p, hash = :h WHERE seq = :s", p=prev, h=digest, s=rec.seq)
        prev = digest
    await raw(store, "UPDATE audit_head SET hash = :h WHERE id = 1", h=prev)


async def test_keyed_chain_starts_from_the_keys_genesis_and_verifies(store: Store) -> None:
    log = AuditLog(store.db, key=KEY)
    await fill(log, 3)
    [first] = await log.query(limit=1)
    assert first.prev_hash == keyed_genesis(KEY) != GENESIS_HASH
    result = await log.verify()
    assert result.ok and result.keyed and result.rows_checked == 3
    unkeyed = await AuditLog(store.db, key=None).verify()
    assert not unkeyed.ok and "TOOLAGENT_AUDIT_KEY" in (unkeyed.reason or "")
    wrong = await AuditLog(store.db, key=b"another key").verify()
    assert (wrong.ok, wrong.first_bad_seq) == (False, 1)


async def test_edited_row_rehashed_without_the_key_fails(store: Store) -> None:
    log = AuditLog(store.db, key=KEY)
    await fill(log, 4)
    await raw(store, "UPDATE audit_log SET reason = 'all fine' WHERE seq = 2")
    await rehash_from(store, log, 2, None)
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 2)
    assert "row 2 was changed" in (result.reason or "")


async def test_keyed_chain_rewritten_as_unkeyed_fails(store: Store) -> None:
    log = AuditLog(store.db, key=KEY)
    await fill(log, 3)
    await raw(store, "UPDATE audit_log SET prev_hash = :g WHERE seq = 1", g=GENESIS_HASH)
    await rehash_from(store, log, 1, None)
    assert (await AuditLog(store.db, key=None).verify()).ok  # a consistent unkeyed chain now...
    result = await log.verify()  # ...which the key refuses
    assert (result.ok, result.first_bad_seq) == (False, 1) and "not keyed" in (result.reason or "")


async def test_unkeyed_chain_still_verifies_and_says_so(store: Store) -> None:
    log = AuditLog(store.db, key=None)
    await fill(log, 2)
    result = await log.verify()
    assert result.ok and not result.keyed


async def test_export_of_a_keyed_chain_checks_only_with_the_key(store: Store) -> None:
    log = AuditLog(store.db, key=KEY)
    await fill(log, 3)
    records = [r.to_json() for r in await log.query()]
    assert check_records(records, key=KEY).ok
    assert not check_records(records).ok
    records[1]["reason"] = "forged"
    records[1]["hash"] = row_hash(
        {**records[1], "arguments": canonical_json(records[1]["arguments"])}, records[1]["prev_hash"]
    )
    assert not check_records(records, key=KEY).ok


def test_signed_head_refuses_a_changed_field() -> None:
    head = sign_head(5, "ab" * 32, KEY)
    assert head.valid(KEY) and not head.valid(b"other")
    forged = type(head)(6, head.hash, head.exported_at, head.scheme, head.signature)
    assert not forged.valid(KEY)


def test_audit_key_from_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert audit_key(Settings.from_env({})) is None
    assert audit_key(Settings.from_env({"TOOLAGENT_AUDIT_KEY": "k1"})) == b"k1"
    f = tmp_path / "key"
    f.write_text("k2\n")
    assert audit_key(Settings.from_env({"TOOLAGENT_AUDIT_KEY_FILE": str(f)})) == b"k2"
    with pytest.raises(UsageError, match="not both"):
        audit_key(Settings.from_env({"TOOLAGENT_AUDIT_KEY": "k1", "TOOLAGENT_AUDIT_KEY_FILE": str(f)}))
    with pytest.raises(UsageError, match="TOOLAGENT_AUDIT_KEY_FILE"):
        audit_key(Settings.from_env({"TOOLAGENT_AUDIT_KEY_FILE": str(tmp_path / "missing")}))
