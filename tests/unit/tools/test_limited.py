"""The limits layer: counted at admission, refused (and recorded) past the rate limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.errors import RateLimited
from toolagent.status import CallStatus

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
        ("failed", "rate_limited"), ("success", None), ("success", None)]
