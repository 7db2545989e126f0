"""The limit check of the admission: counted in the admission transaction, refused (and recorded) past the rate limit."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from toolagent.errors import RateLimited
from toolagent.model.status import CallStatus

from ._stack import rig

pytestmark = pytest.mark.anyio


async def test_calls_past_the_rate_limit_are_refused_and_recorded(tmp_path: Path) -> None:
    config = {"plans": {"enterprise": {"rate_per_minute": 2}}}
    async with rig(tmp_path, config=config) as r:
        r.stub.add("file/read", lambda a: "x")
        first = await r.call("file/read")
        second = await r.call("file/read")
        third = await r.call("file/read")
        page = await r.runtime.history(r.me)
    assert [first.status, second.status, third.status] == [CallStatus.OK, CallStatus.OK, CallStatus.DENIED]
    assert first.limits and min(s.remaining for s in first.limits) == 1
    assert min(s.remaining for s in second.limits) == 0
    assert isinstance(third.exception, RateLimited) and third.denial == "rate_limited"
    assert len(r.stub.calls) == 2
    assert sorted((e.status, e.denial) for e in page.executions) == [
        ("failed", "rate_limited"),
        ("success", None),
        ("success", None),
    ]


async def test_a_call_the_budget_refuses_takes_nothing_from_the_rate_limit(tmp_path: Path) -> None:
    # The rate counter is taken before the budget: the refusal must give it back.
    config = {"plans": {"enterprise": {"rate_per_minute": 10, "monthly_budget": 2}}}
    async with rig(tmp_path, config=config) as r:
        r.stub.add("file/read", lambda a: "x")
        outcomes = [await r.call("file/read") for _ in range(4)]
        statuses = {s.kind: s for s in await r.runtime.limit_status(r.me)}
    assert [o.status for o in outcomes] == [CallStatus.OK, CallStatus.OK, CallStatus.DENIED, CallStatus.DENIED]
    assert outcomes[2].denial == "budget"
    assert (statuses["rate"].used, statuses["budget"].used) == (2, 2)


async def test_concurrent_calls_past_the_budget_take_nothing_and_the_others_are_counted(tmp_path: Path) -> None:
    config = {"plans": {"enterprise": {"rate_per_minute": 100, "monthly_budget": 5}}}
    async with rig(tmp_path, config=config) as r:
        r.stub.add("file/read", lambda a: "x")
        outcomes: list[CallStatus] = []

        async def one() -> None:
            outcomes.append((await r.call("file/read")).status)

        async with anyio.create_task_group() as tg:
            for _ in range(12):
                tg.start_soon(one)
        statuses = {s.kind: s for s in await r.runtime.limit_status(r.me)}
        writes = r.runtime.recorder.writes.stats
    assert sorted(outcomes).count(CallStatus.OK) == 5 and outcomes.count(CallStatus.DENIED) == 7
    assert (statuses["rate"].used, statuses["budget"].used) == (5, 5)
    assert writes.largest > 1  # the admissions shared transactions
