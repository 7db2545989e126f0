"""The timeout layer: the deadline and cancel by id end a call as `timed_out` or `cancelled`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from toolagent.model.status import CallStatus
from toolagent.tools.base import CallContext, ToolCall
from toolagent.tools.timeout import TimeoutSource

from ._stack import rig

pytestmark = pytest.mark.anyio


async def _forever(arguments: dict[str, Any]) -> None:
    await anyio.sleep_forever()


async def test_the_deadline_ends_the_call_as_timed_out(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        r.stub.add("web/get", _forever)
        entry = await r.stub.resolve("web/get")
        call = ToolCall(entry, {}, "exec_1_00000000", r.runtime.clock(), timeout_ms=20)
        with anyio.fail_after(5):
            outcome = await TimeoutSource(r.stub, r.runtime.cancellation).call_tool(call, CallContext(r.me))
    assert outcome.status is CallStatus.TIMED_OUT
    assert outcome.reason == "timeout after 20 ms" and outcome.error == "tool 'web/get' timed out after 20 ms"


async def test_cancel_by_id_ends_the_call_as_cancelled_and_records_it(tmp_path: Path) -> None:
    async with rig(tmp_path) as r:
        started = anyio.Event()

        async def wait(arguments: dict[str, Any]) -> None:
            started.set()
            await anyio.sleep_forever()

        r.stub.add("web/get", wait)
        outcomes = []
        ids: list[str] = []
        async with anyio.create_task_group() as tg:

            async def go() -> None:
                outcomes.append(await r.call("web/get", on_admitted=lambda e: ids.append(e.id)))

            tg.start_soon(go)
            with anyio.fail_after(5):
                await started.wait()
                cancelled = await r.runtime.cancel(ids[0], r.me)
    assert cancelled.status == "cancelled" and cancelled.reason == "cancelled by tester"
    assert outcomes[0].status is CallStatus.CANCELLED and outcomes[0].reason == "cancelled by tester"
