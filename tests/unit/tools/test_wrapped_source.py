"""`WrappedSource`: a layer forwards what it does not override straight to the source below it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from toolagent.engine.principals import Principal
from toolagent.model.status import CallStatus
from toolagent.testing import StubToolSource
from toolagent.tools.base import CallContext, CallOutcome, ToolCall, WrappedSource
from toolagent.tools.stack import ToolStack

pytestmark = pytest.mark.anyio


@dataclass
class Passing(WrappedSource):
    """Overrides nothing."""


@dataclass
class Tagging(WrappedSource):
    """Overrides the call only: marks each outcome it passes up."""

    seen: list[str] | None = None

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        outcome = await self.inner.call_tool(call, ctx)
        assert self.seen is not None
        self.seen.append(call.name)
        return outcome


def _ctx() -> CallContext:
    return CallContext(Principal(name="u", level="admin", plan="enterprise"))


def test_a_layer_that_overrides_nothing_hands_each_method_to_the_source_below() -> None:
    stub = StubToolSource()
    outer = Passing(Passing(stub))
    for name in ("call_tool", "check", "resolve", "list_tools"):
        assert getattr(outer, name) == getattr(stub, name), name


def test_an_overridden_method_stays_the_layers_own_and_the_rest_pass_through_it() -> None:
    stub = StubToolSource()
    tagging = Tagging(Passing(stub), seen=[])
    outer = Passing(tagging)
    assert outer.call_tool == tagging.call_tool
    assert outer.resolve == stub.resolve


async def test_calls_cross_the_overriding_layers_only_and_answer_as_before() -> None:
    stub = StubToolSource()
    stub.add("s/echo", lambda a: {"echo": a["text"]})
    seen: list[str] = []
    stack = ToolStack(Passing(Tagging(Passing(stub), seen=seen)))
    outcome = await stack.call("s/echo", {"text": "hi"}, _ctx())
    assert outcome.status is CallStatus.OK and outcome.result is not None
    assert outcome.result.structured == {"echo": "hi"}
    assert seen == ["s/echo"] and stub.calls == [("s/echo", {"text": "hi"})]
