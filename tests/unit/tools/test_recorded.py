"""The record layer: one running row then one final row per call, with their audit rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolagent.errors import UpstreamError
from toolagent.status import CallStatus
from toolagent.tools.spec import ToolResult

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
        (event, o.execution_id) for o in (ok, reported, broken) for event in ("decision", "outcome")]
    assert verified.ok
