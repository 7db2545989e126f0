"""The audit log on SQLite and PostgreSQL: hash chain, tamper detection, concurrency, export."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

from toolagent.engine.audit import AuditEntry, AuditLog
from toolagent.engine.audit_chain import canonical_json, check_records, row_hash
from toolagent.model.redaction import REDACTED
from toolagent.store import Store, open_store
from toolagent.store.audit import GENESIS_HASH, AuditChainBroken

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    async with open_store(db_url) as s:
        yield s


def entry(i: int = 0, **overrides: object) -> AuditEntry:
    values: dict[str, object] = {
        "principal": f"user{i % 3}",
        "api_key_id": "key_1",
        "tool": "file_read",
        "risk": "safe",
        "level": "execute_basic",
        "decision": "allow",
        "reason": None,
        "arguments": {"path": f"/tmp/{i}"},
        "execution_id": f"exec_{i}",
        "run_id": "run_1",
        "event": "decision",
    }
    values.update(overrides)
    return AuditEntry(**values)  # type: ignore[arg-type]


async def fill(log: AuditLog, n: int) -> None:
    for i in range(n):
        await log.append(entry(i))


async def raw(store: Store, sql: str) -> None:
    async with store.db.begin() as conn:
        await conn.execute(sa.text(sql))


async def test_append_numbers_rows_and_verifies(store: Store) -> None:
    log = AuditLog(store.db)
    assert (await log.verify()).ok
    assert [await log.append(entry(i)) for i in range(5)] == [1, 2, 3, 4, 5]
    result = await log.verify()
    assert result.ok and result.rows_checked == 5 and result.first_bad_seq is None
    records = await log.query()
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert records[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in zip(records, records[1:], strict=False))
    assert (result.head_seq, result.head_hash) == (5, records[-1].hash) == await log.head()


async def test_record_round_trips_every_field(store: Store) -> None:
    log = AuditLog(store.db)
    start = datetime(2025, 1, 2, 3, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    e = AuditEntry(
        principal="alice",
        api_key_id="key_9",
        tool="shell_exec",
        risk="dangerous",
        level="admin",
        decision="allow",
        reason="ok",
        arguments={"cmd": "ls", "n": 1.0, "tags": ("a", "b"), 3: None},
        outcome="success",
        started_at=start,
        ended_at=start + timedelta(milliseconds=1500),
        duration_ms=1500,
        run_id="run_7",
        execution_id="exec_7",
        event="outcome",
    )
    await log.append(e)
    [rec] = await log.query()
    assert rec.started_at == start and rec.started_at.tzinfo == UTC
    assert rec.ended_at == start + timedelta(milliseconds=1500)
    assert rec.duration_ms == 1500.0 and isinstance(rec.duration_ms, float)
    assert rec.arguments == {"cmd": "ls", "n": 1.0, "tags": ["a", "b"], "3": None}
    assert (
        rec.principal,
        rec.api_key_id,
        rec.tool,
        rec.risk,
        rec.level,
        rec.decision,
        rec.outcome,
        rec.run_id,
        rec.execution_id,
        rec.event,
    ) == ("alice", "key_9", "shell_exec", "dangerous", "admin", "allow", "success", "run_7", "exec_7", "outcome")
    assert (await log.verify()).ok


async def test_secrets_never_reach_the_table(store: Store) -> None:
    log = AuditLog(store.db)
    await log.append(
        entry(
            arguments={
                "url": "postgresql://u:hunter2@db/x",
                "api_key": "sEcr3tVal",
                "headers": {"Authorization": "Bearer t0ken.x"},
            },
            reason="connect failed: password=hunter2",
            decision="deny",
            outcome="denied",
        )
    )
    async with store.db.begin() as conn:
        dump = json.dumps([list(r) for r in await conn.execute(sa.text("SELECT * FROM audit_log"))], default=str)
    for secret in ("hunter2", "t0ken.x", "sEcr3tVal"):
        assert secret not in dump
    [rec] = await log.query()
    assert rec.arguments["api_key"] == REDACTED
    assert rec.reason == f"connect failed: password={REDACTED}"
    assert (await log.verify()).ok


async def test_changed_reason_is_detected_at_its_row(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 6)
    await raw(store, "UPDATE audit_log SET reason = 'nothing to see' WHERE seq = 3")
    result = await log.verify()
    assert not result.ok and result.first_bad_seq == 3
    assert "row 3 was changed" in (result.reason or "")


@pytest.mark.parametrize("column", ["principal", "tool", "decision", "arguments", "recorded_at", "duration_ms"])
async def test_any_changed_column_is_detected(store: Store, column: str) -> None:
    log = AuditLog(store.db)
    await fill(log, 3)
    value = {"recorded_at": "'2020-01-01 00:00:00'", "duration_ms": "1", "arguments": "'{}'"}.get(column, "'x'")
    await raw(store, f"UPDATE audit_log SET {column} = {value} WHERE seq = 2")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 2)


async def test_rehashed_row_breaks_the_link_of_the_next(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 4)
    [rec] = await log.query(execution_id="exec_1")
    forged = {**rec.to_json(), "reason": "forged"}
    forged["arguments"] = canonical_json(rec.arguments)
    new_hash = row_hash({**forged, "recorded_at": rec.recorded_at}, rec.prev_hash)
    await raw(store, f"UPDATE audit_log SET reason = 'forged', hash = '{new_hash}' WHERE seq = 2")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 3)
    assert "does not chain to row 2" in (result.reason or "")


async def test_deleted_middle_row_is_detected(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 5)
    await raw(store, "DELETE FROM audit_log WHERE seq = 3")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 3)
    assert "row 3 is missing" in (result.reason or "")


async def test_deleted_last_rows_are_detected_by_the_head(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 5)
    await raw(store, "DELETE FROM audit_log WHERE seq = 5")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq, result.head_seq) == (False, 5, 5)
    assert "row 5 is missing" in (result.reason or "") and "deleted from the end" in (result.reason or "")
    await raw(store, "DELETE FROM audit_log WHERE seq >= 3")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 3)
    assert "rows 3-5 are missing" in (result.reason or "")


async def test_reordered_rows_are_detected(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 4)
    await raw(store, "UPDATE audit_log SET seq = 100 WHERE seq = 2")
    await raw(store, "UPDATE audit_log SET seq = 2 WHERE seq = 3")
    await raw(store, "UPDATE audit_log SET seq = 3 WHERE seq = 100")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 2)


async def test_missing_head_or_rows_past_it_are_detected(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 3)
    await raw(store, "UPDATE audit_head SET seq = 2")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 3)
    assert "beyond the chain head" in (result.reason or "")
    await raw(store, "DELETE FROM audit_head")
    result = await log.verify()
    assert not result.ok and "head is missing" in (result.reason or "")
    with pytest.raises(AuditChainBroken):
        await log.append(entry())


async def test_head_hash_mismatch_is_detected(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 2)
    await raw(store, f"UPDATE audit_head SET hash = '{'f' * 64}'")
    result = await log.verify()
    assert (result.ok, result.first_bad_seq) == (False, 2)


async def test_concurrent_appends_from_20_tasks_keep_one_chain(store: Store) -> None:
    log = AuditLog(store.db)
    seqs: list[int] = []

    async def one(i: int) -> None:
        seqs.append(await log.append(entry(i)))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(one, i)
    assert sorted(seqs) == list(range(1, 21))
    result = await log.verify()
    assert result.ok and result.rows_checked == 20


async def test_two_logs_on_separate_engines_append_concurrently(db_url: str) -> None:
    async with open_store(db_url) as a, open_store(db_url) as b:
        logs = [AuditLog(a.db), AuditLog(b.db)]

        async def many(log: AuditLog, who: int) -> None:
            for i in range(15):
                await log.append(entry(i, principal=f"p{who}"))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for who, log in enumerate(logs):
                    for _ in range(2):
                        tg.start_soon(many, log, who)
        result = await logs[0].verify()
    assert result.ok and result.rows_checked == 60


async def test_appends_chain_to_the_committed_head_after_a_rollback_and_another_log(db_url: str) -> None:
    # On SQLite a log chains to the head it last wrote and moves it only if it is still that one:
    # a rolled-back append and another log's append each leave it behind, and it reads the head.
    async with open_store(db_url) as a, open_store(db_url) as b:
        first, other = AuditLog(a.db), AuditLog(b.db)
        await first.append(entry(1))

        def append_then_fail(conn: sa.Connection) -> None:
            first.append_in(conn, entry(2))
            raise RuntimeError("rolled back")

        with pytest.raises(RuntimeError):
            await a.db.write(append_then_fail)
        await first.append(entry(3))
        await other.append(entry(4))
        await first.append(entry(5))
        result = await first.verify()
    assert result.ok and result.rows_checked == 4 and result.head_seq == 4


async def test_a_sqlite_log_reads_the_head_only_when_another_writer_moved_it(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'audit.db'}"
    async with open_store(url) as a, open_store(url) as b:
        first, other = AuditLog(a.db), AuditLog(b.db)
        claim = first.rows._claim_head
        reads = 0
        real = claim.execute

        def counted(*args: object) -> object:
            nonlocal reads
            reads += 1
            return real(*args)  # type: ignore[arg-type]

        claim.execute = counted  # type: ignore[method-assign]
        await fill(first, 4)
        assert reads == 1  # the first append; the next ones move the head they wrote
        await other.append(entry(9))
        await fill(first, 2)
        assert reads == 2  # the head had moved under it: read once, then on its own again
        assert (await first.verify()).ok


_WORKER = textwrap.dedent("""
    import sys, anyio
    from toolagent.store import Store
    from toolagent.engine.audit import AuditEntry, AuditLog

    async def main() -> None:
        store = Store(sys.argv[1])
        try:
            log = AuditLog(store.db)
            for i in range(int(sys.argv[2])):
                await log.append(AuditEntry(principal=sys.argv[3], tool="t", decision="allow"))
        finally:
            await store.close()

    anyio.run(main)
""")


async def test_appends_from_several_processes_keep_one_chain(db_url: str) -> None:
    async with open_store(db_url):
        pass  # migrate once, before the workers race

    def run_workers() -> list[int]:
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, db_url, "15", f"proc{i}"]) for i in range(3)]
        return [p.wait(timeout=90) for p in procs]

    assert await anyio.to_thread.run_sync(run_workers) == [0, 0, 0]
    async with open_store(db_url) as store:
        log = AuditLog(store.db)
        result = await log.verify()
        assert result.ok and result.rows_checked == 45
        assert {r.principal for r in await log.query(limit=100)} == {"proc0", "proc1", "proc2"}


async def test_export_writes_jsonl_that_checks_offline(store: Store, tmp_path: Path) -> None:
    log = AuditLog(store.db)
    await fill(log, 4)
    path = tmp_path / "audit.jsonl"
    assert await log.export(path) == 4
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4]
    assert lines[0]["arguments"] == {"path": "/tmp/0"} and lines[0]["recorded_at"].endswith("+00:00")
    assert set(lines[0]) >= {"seq", "recorded_at", "principal", "tool", "decision", "prev_hash", "hash"}
    head = await log.head()
    assert check_records(lines, head=head).ok
    assert check_records(lines[2:]).ok  # a partial export checks from its first row
    lines[1]["reason"] = "edited"
    bad = check_records(lines)
    assert (bad.ok, bad.first_bad_seq) == (False, 2)
    short = check_records([json.loads(x) for x in path.read_text().splitlines()][:3], head=head)
    assert (short.ok, short.first_bad_seq) == (False, 4)


async def test_export_to_a_file_object_and_since(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 3)
    buf = io.StringIO()
    assert await log.export(buf) == 3
    assert len(buf.getvalue().splitlines()) == 3
    later = datetime.now(UTC) + timedelta(hours=1)
    assert await log.export(io.StringIO(), since=later) == 0
    earlier = datetime.now(UTC) - timedelta(hours=1)
    assert await log.export(io.StringIO(), since=earlier.replace(tzinfo=None)) == 3


async def test_query_filters(store: Store) -> None:
    log = AuditLog(store.db)
    await fill(log, 6)
    await log.append(entry(9, decision="deny", reason="level too low", event="decision"))
    assert [r.seq for r in await log.query(principal="user1")] == [2, 5]
    assert [r.seq for r in await log.query(decision="deny")] == [7]
    assert [r.seq for r in await log.query(execution_id="exec_3")] == [4]
    assert [r.seq for r in await log.query(limit=2, newest_first=True)] == [7, 6]
    assert await log.query(tool="nope") == []


@pytest.mark.parametrize("junk", [{"seq": "1"}, {"seq": 1, "prev_hash": GENESIS_HASH}, {"recorded_at": 5}, []])
def test_check_records_reports_junk_instead_of_crashing(junk: object) -> None:
    result = check_records([junk])  # type: ignore[list-item]
    assert (result.ok, result.first_bad_seq) == (False, 1)
    assert "record 1 is not an audit record" in (result.reason or "")


@pytest.mark.parametrize("bad", [{"decision": "maybe"}, {"outcome": "ok"}, {"event": ""}])
def test_entry_rejects_unknown_values(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        AuditEntry(**bad)  # type: ignore[arg-type]


def test_a_row_is_spelled_and_hashed_as_every_earlier_release_did() -> None:
    # Chains written by earlier releases must still verify: the stored spelling of an entry and its
    # hash are pinned here, for text that needs cleaning (NUL, a lone surrogate, non-ASCII), a
    # secret, nested arguments with a tuple, and a start time in another zone.
    from toolagent.engine.audit import _stored_fields

    t0 = datetime(2026, 11, 24, 12, 0, 0, 123456, tzinfo=UTC)
    stored = _stored_fields(
        entry(
            principal="bób\x00x",
            api_key_id="k1",
            tool="fs/read",
            level="admin",
            reason="token sk-live-abcdefghijklmnopqrstuvwx here \ud800",
            run_id="r1",
            execution_id="e1",
            arguments={"b": [1, 2.5, None, True], "a": {"z": "é", "token": "abc"}, "t": (1, 2)},
            started_at=t0.astimezone(timezone(timedelta(hours=2))),
        )
    )
    assert stored == {
        "principal": "bób\ufffdx",
        "api_key_id": "k1",
        "tool": "fs/read",
        "risk": "safe",
        "level": "admin",
        "decision": "allow",
        "reason": f"token {REDACTED} here ?",
        "arguments": '{"a":{"token":"[REDACTED]","z":"\\u00e9"},"b":[1,2.5,null,true],"t":[1,2]}',
        "outcome": None,
        "started_at": t0,
        "ended_at": None,
        "duration_ms": None,
        "run_id": "r1",
        "execution_id": "e1",
        "event": "decision",
    }
    row = {"seq": 7, "recorded_at": datetime(2026, 11, 24, 12, 0, 1), **stored}
    assert row_hash(row, "a" * 64) == "caf54ecfce4baebc4f8e7f714520591d1a56671ffae4ae64c7c5035c90a2825c"
    assert row_hash(row, "a" * 64, key=b"k" * 32) == "52b9b68f36b4a49ef930e7550f5906d48ec055d7350efcb5288081cb53e1780c"


def test_arguments_spelled_once_are_stored_as_spelled() -> None:
    # A call's two rows share the arguments' spelling, made once (`spell_arguments`): the stored
    # text is the one the row would have spelled itself, secrets masked.
    from toolagent.engine.audit import _stored_fields, spell_arguments
    from toolagent.model.redaction import redact

    arguments = {"b": [1, 2.5, None, True], "a": {"z": "é", "token": "abc"}, "t": (1, 2)}
    pinned = '{"a":{"token":"[REDACTED]","z":"\\u00e9"},"b":[1,2.5,null,true],"t":[1,2]}'
    assert spell_arguments(arguments) == pinned
    assert spell_arguments(redact(arguments), redacted=True) == pinned
    assert spell_arguments(None) is None
    spelled = _stored_fields(entry(arguments={"ignored": True}, spelled_arguments=pinned))
    assert spelled["arguments"] == pinned and "spelled_arguments" not in spelled
    assert _stored_fields(entry(arguments=arguments)) == _stored_fields(
        entry(arguments=arguments, spelled_arguments=pinned)
    )
