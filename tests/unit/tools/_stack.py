"""Shared set-up of the tool-layer tests: a started runtime over a temp store and a stub source."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolagent.engine.config import EngineConfig
from toolagent.engine.principals import Principal
from toolagent.runtime import Runtime
from toolagent.testing import UNLIMITED, StubToolSource, temp_store, test_runtime
from toolagent.tools.base import CallContext, CallOutcome, ToolSource
from toolagent.tools.stack import ToolStack, build_tool_stack


@dataclass
class Rig:
    """A runtime, a stub source, a caller and a stack over the stub."""

    runtime: Runtime
    stub: StubToolSource
    me: Principal
    stack: ToolStack

    async def call(self, tool: str, arguments: dict[str, Any] | None = None, **ctx: Any) -> CallOutcome:
        return await self.stack.call(tool, arguments or {}, CallContext(ctx.pop("principal", self.me), **ctx))

    def over(self, source: ToolSource) -> ToolStack:
        """An entry point over `source` instead of the whole stack."""
        return ToolStack(source, clock=self.runtime.clock)


@contextlib.asynccontextmanager
async def rig(
    tmp_path: Path, *, level: str = "admin", config: dict[str, Any] | None = None, governed: bool = True
) -> AsyncIterator[Rig]:
    async with (
        temp_store(tmp_path) as store,
        test_runtime(store, level=level, config=EngineConfig.from_data({**UNLIMITED, **(config or {})})) as (
            runtime,
            me,
        ),
    ):
        stub = StubToolSource(runtime.config)
        source = build_tool_stack(
            stub,
            recorder=runtime.recorder if governed else None,
            limits=runtime.limits,
            cancellation=runtime.cancellation,
            clock=runtime.clock,
        )
        yield Rig(runtime, stub, me, ToolStack(source, runtime.config.default_timeout_ms, runtime.clock))
