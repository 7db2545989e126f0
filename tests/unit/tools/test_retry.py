"""The retry layer: only calls that are safe to repeat are sent again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolagent.errors import ServerUnavailable, ToolFailed, UpstreamError
from toolagent.model.status import CallStatus
from toolagent.testing import StubToolSource
from toolagent.tools.base import CallContext, ToolCall
from toolagent.tools.retry import RetryingSource

from ._stack import rig

pytestmark = pytest.mark.anyio


def flaky(errors: list[Exception]) -> Any:
    def handler(arguments: dict[str, Any]) -> str:
        if errors:
            raise errors.pop(0)
        return "ok"

    return handler


async def _call(stub: StubToolSource, name: str, me: Any) -> Any:
    call = ToolCall(await stub.resolve(name), {}, "exec_1_00000000", 0.0, 30_000)
    return await RetryingSource(stub, first_wait_s=0, max_wait_s=0).call_tool(call, CallContext(me))


@pytest.mark.parametrize(
    ("risk", "errors", "calls", "raised"),
    [
        # A read-only tool is sent again after a transport error.
        ("safe", [UpstreamError("reset"), UpstreamError("reset")], 3, None),
        # A write whose request may have reached the server is never repeated.
        ("dangerous", [UpstreamError("reset")], 1, UpstreamError),
        ("moderate", [UpstreamError("reset")], 1, UpstreamError),
        # Nothing was sent when the server could not be reached: any tool may be retried.
        ("dangerous", [ServerUnavailable("db", "not started")], 2, None),
        # An error that is not retryable is not retried, even for a read.
        ("safe", [ToolFailed("file/read", "bad path")], 1, ToolFailed),
        # Three attempts in all, then the last error.
        ("safe", [UpstreamError("a"), UpstreamError("b"), UpstreamError("c")], 3, UpstreamError),
    ],
)
async def test_retries_follow_the_retryable_flag_and_the_tools_risk(
    tmp_path: Path, risk: str, errors: list[Exception], calls: int, raised: type[Exception] | None
) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("file/op", flaky(list(errors)), risk=risk)
        if raised is None:
            outcome = await _call(r.stub, "file/op", r.me)
            assert outcome.status is CallStatus.OK
        else:
            with pytest.raises(raised):
                await _call(r.stub, "file/op", r.me)
    assert len(r.stub.calls) == calls


async def test_a_trusted_read_only_annotation_makes_an_unrated_tool_retryable(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add(
            "x/look", flaky([UpstreamError("reset")]), risk=None, trusted=True, annotations={"read_only_hint": True}
        )
        outcome = await _call(r.stub, "x/look", r.me)
    assert outcome.status is CallStatus.OK and len(r.stub.calls) == 2
