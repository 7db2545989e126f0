"""The record layer: one running row then one final row per call, with their audit rows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

from toolagent.errors import UpstreamError
from toolagent.model.spec import ToolResult
from toolagent.model.status import CallStatus
from toolagent.store import engine_tables as et

from ._stack import rig

pytestmark = pytest.mark.anyio


def _broken(arguments: dict) -> None:
    raise UpstreamError("connection lost during the call")


async def test_each_outcome_is_stored_with_its_audit_rows(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("file/read", lambda a: {"value": 1})
        r.stub.add("file/list", lambda a: ToolResult(True, None, [], "no such folder"))
        r.stub.add("file/write", _broken, risk="dangerous")
        ok = await r.call("file/read", {"path": "/x", "token": "sk-live-abcdefghijklmnopqrstuvwx"})
        reported = await r.call("file/list")
        broken = await r.call("file/write")
        stored = [await r.runtime.get_execution(o.execution_id or "", r.me) for o in (ok, reported, broken)]
        audit = [row async for row in r.runtime.audit.iter_records()]  # type: ignore[union-attr]
        verified = await r.runtime.audit.verify()  # type: ignore[union-attr]
    assert ok.status is CallStatus.OK and ok.result is not None and ok.result.structured == {"value": 1}
    assert [s.status for s in stored] == ["success", "failed", "failed"]
    assert stored[0].duration_ms is not None
    assert "sk-live" not in str(stored[0].arguments)  # stored redacted
    assert reported.status is CallStatus.FAILED and stored[1].result is not None and stored[2].result is None
    assert broken.status is CallStatus.FAILED and isinstance(broken.exception, UpstreamError)
    assert broken.error == "connection lost during the call"
    assert [(a.event, a.execution_id) for a in audit] == [
        (event, o.execution_id) for o in (ok, reported, broken) for event in ("decision", "outcome")
    ]
    assert verified.ok


async def test_outcomes_stored_in_one_batch_leave_a_row_closed_meanwhile_as_it_was(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        release = anyio.Event()

        async def held(arguments: dict) -> dict:
            await release.wait()
            return {"n": arguments["n"]}

        r.stub.add("file/read", held)
        admitted: list = []
        outcomes: dict = {}

        async def one(n: int) -> None:
            # As a BUILD step: the outcome's write is queued, and settled below.
            outcomes[n] = await r.call("file/read", {"n": n}, on_admitted=admitted.append, settle_later=True)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for n in range(3):
                    tg.start_soon(one, n)
                while len(admitted) < 3:
                    await anyio.sleep(0.01)
                release.set()
            # Another process took the second call for dead and closed its row meanwhile.
            second = next(e for e in admitted if e.arguments == {"n": 1})
            assert await r.runtime.executions.finish(
                dataclasses.replace(
                    second, status="failed", reason="interrupted", error="interrupted", ended_at=datetime.now(UTC)
                )
            )
            before = r.runtime.recorder.writes.stats
            stored = [await outcomes[n].settle() for n in range(3)]  # the first settle commits all three
        after = r.runtime.recorder.writes.stats
        audit = [row async for row in r.runtime.audit.iter_records()]  # type: ignore[union-attr]
        verified = await r.runtime.audit.verify()  # type: ignore[union-attr]
        async with r.runtime.db.begin() as conn:
            totals = {
                (t.status, t.calls)
                for t in await conn.execute(
                    sa.select(et.execution_totals).where(et.execution_totals.c.tool == "file/read")
                )
            }
    assert (after.batches - before.batches, after.writes - before.writes) == (1, 3)  # one transaction
    assert [s.status for s in stored] == ["success", "failed", "success"]
    assert stored[1].id == second.id and stored[1].reason == "interrupted"
    # The closed row keeps its state: no outcome audit row of this process, counted once as failed.
    assert sorted(a.execution_id for a in audit if a.event == "outcome") == sorted(stored[n].id for n in (0, 2))
    assert totals == {("success", 2), ("failed", 1)}
    assert verified.ok


async def test_the_recorder_counts_the_calls_under_way_whatever_their_end(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        release = anyio.Event()
        seen: list[int] = []

        async def held(arguments: dict) -> dict:
            seen.append(r.runtime.recorder.calls_under_way)
            await release.wait()
            return {}

        r.stub.add("file/read", held)
        r.stub.add("file/write", _broken)
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(r.call, "file/read")
                while len(seen) < 3:
                    await anyio.sleep(0.01)
                under_way = r.runtime.recorder.calls_under_way
                release.set()
            broken = await r.call("file/write")
            refused = await r.call("file/read", principal=dataclasses.replace(r.me, level="view_only"))
        after = r.runtime.recorder.calls_under_way
    assert under_way == 3 and seen[-1] == 3
    assert broken.status is CallStatus.FAILED and refused.status is CallStatus.DENIED
    assert after == 0  # a lone call then writes without waiting a turn of the event loop for company
