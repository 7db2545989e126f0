"""Admission checks as a list: each screens before any I/O and admits inside the one admission
transaction, in order; a refusal from either phase is recorded in one place and nothing runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolagent.engine.config import EngineConfig
from toolagent.model.execution import Execution
from toolagent.model.limits import LimitStatus
from toolagent.model.status import CallStatus
from toolagent.policy import Decision, Policy
from toolagent.store.db import Connection
from toolagent.testing import UNLIMITED, StubToolSource, temp_store, test_runtime
from toolagent.tools.admission import AdmissionCheck, LimitCheck, PolicyCheck
from toolagent.tools.base import CallContext, ToolCall
from toolagent.tools.stack import ToolStack, build_tool_stack

pytestmark = pytest.mark.anyio


@dataclass
class Noting(AdmissionCheck):
    """Notes each phase it runs in; refuses in the phase it is told to."""

    name: str
    seen: list[str]
    refuse_in: str | None = None

    def screen(self, call: ToolCall, ctx: CallContext) -> Decision | None:
        self.seen.append(f"{self.name}.screen")
        if self.refuse_in == "screen":
            return Decision("deny", f"{self.name} says no", "rule", f"rule:{self.name}")
        return None

    def admit(
        self, conn: Connection, call: ToolCall, ctx: CallContext, execution: Execution
    ) -> Decision | Sequence[LimitStatus] | None:
        self.seen.append(f"{self.name}.admit")
        if self.refuse_in == "admit":
            return Decision("deny", f"{self.name} says no now", "rule", f"rule:{self.name}")
        return None


async def _call(tmp_path: Path, checks: list[AdmissionCheck], stub_calls: list[str]) -> tuple[object, Execution]:
    async with (
        temp_store(tmp_path) as store,
        test_runtime(store, level="admin", config=EngineConfig.from_data(UNLIMITED)) as (runtime, me),
    ):
        stub = StubToolSource(runtime.config)
        stub.add("file/read", lambda a: stub_calls.append("called") or "x")
        source = build_tool_stack(stub, recorder=runtime.recorder, cancellation=runtime.cancellation, checks=checks)
        outcome = await ToolStack(source, runtime.config.default_timeout_ms, runtime.clock).call(
            "file/read", {}, CallContext(me)
        )
        record = await runtime.get_execution(outcome.execution_id or "", me)
        return outcome, record


async def test_every_check_screens_then_admits_in_its_order(tmp_path: Path) -> None:
    seen: list[str] = []
    calls: list[str] = []
    outcome, record = await _call(tmp_path, [Noting("a", seen), Noting("b", seen)], calls)
    assert outcome.status is CallStatus.OK and calls == ["called"]  # type: ignore[attr-defined]
    # Screened before the argument checks and again at admission (pure: asked twice, same answer).
    assert seen == ["a.screen", "b.screen"] * 2 + ["a.admit", "b.admit"]
    assert record.status == "success"


@pytest.mark.parametrize("phase", ["screen", "admit"])
async def test_a_refusal_in_either_phase_is_recorded_and_stops_the_call(tmp_path: Path, phase: str) -> None:
    seen: list[str] = []
    calls: list[str] = []
    checks: list[AdmissionCheck] = [Noting("first", seen, refuse_in=phase), Noting("second", seen)]
    outcome, record = await _call(tmp_path, checks, calls)
    assert outcome.status is CallStatus.DENIED and outcome.denial == "rule"  # type: ignore[attr-defined]
    assert calls == []  # the tool never ran
    assert (record.status, record.denied, record.denial) == ("failed", True, "rule")
    if phase == "screen":
        assert set(seen) == {"first.screen"}  # nothing after a refusal, and no transaction at all
        assert record.reason == "first says no"
    else:
        assert seen[-3:] == ["first.screen", "second.screen", "first.admit"]  # not second.admit
        assert record.reason == "first says no now"


async def test_the_default_checks_are_the_policy_then_the_limits(tmp_path: Path) -> None:
    async with temp_store(tmp_path) as store, test_runtime(store) as (runtime, _):
        source = build_tool_stack(
            StubToolSource(runtime.config), recorder=runtime.recorder, limits=runtime.limits, policy=Policy()
        )
    assert [type(c) for c in source.checks] == [PolicyCheck, LimitCheck]  # type: ignore[attr-defined]
