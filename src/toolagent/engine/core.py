"""`Engine`: the runtime without servers, calling tools through a function of the caller's.

Its one job is governing a call whose transport the caller owns: `execute` sends it through the
same tool stack as every other call (gate, limits, record and audit, timeout and cancellation,
retries, schema check), with `invoke` as the innermost source. Embedders and tests use it;
entry points use `toolagent.runtime.open_runtime`.

```python
async with open_store(url) as store, Engine(store, config=EngineConfig.load()) as engine:
    engine.registry.update(specs)
    principal = await engine.principals.resolve_cli_user(None)
    execution = await engine.execute(spec, {"path": "/tmp/x"}, principal, invoke)
```
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from ..runtime import DEFAULT_AUDIT, Runtime
from ..status import CallStatus
from ..store.execution_record import Execution
from ..tools.base import CallContext, CallOutcome, ToolCall, ToolSource, result_outcome
from ..tools.cancellation import CANCEL_WAIT_S
from ..tools.spec import ToolResult, ToolSpec
from ..tools.stack import ToolStack, build_tool_stack
from .principals import ApiKey, Principal
from .reads import ToolDetails
from .registry import ToolEntry

Invoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


@dataclass
class InvokeSource(ToolSource):
    """An innermost source that performs every call with one function (`invoke(arguments)`)."""

    invoke: Invoke

    async def list_tools(self, ctx: CallContext | None = None) -> dict[str, ToolEntry]:
        """No listing: the caller names the tool."""
        return {}

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """`invoke(arguments)`; its errors propagate to the outer layers."""
        return result_outcome(call, await self.invoke(call.arguments))


class Engine(Runtime):
    """The runtime over a store, for calls performed by a caller-given function."""

    async def execute(
        self,
        spec: ToolSpec,
        arguments: dict[str, Any],
        principal: Principal,
        invoke: Invoke,
        *,
        timeout_ms: int | None = None,
        run_id: str | None = None,
        agent_tools: Sequence[str] | None = None,
        api_key: ApiKey | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Execution:
        """Gate, record and run one tool call through the tool stack.

        Returns:
            The finished execution: `success`, `failed` (also when the tool reported an error;
            its result is kept) or `cancelled` (timeout, cancel by id, or a cancelled run).

        Raises:
            UsageError: The timeout is out of range, or the engine is not started.
            ExecutionDenied: (FORBIDDEN) the gate refused; recorded, never sent.
            RateLimited, BudgetExceeded: (TOO_MANY_REQUESTS) a limit refused; recorded, never sent.
        """
        if not self.started:
            raise UsageError("the engine is not started: use `async with Engine(...)` or `await engine.start()` first")
        stack = ToolStack(
            build_tool_stack(
                InvokeSource(invoke),
                recorder=self.recorder,
                limits=self.limits,
                cancellation=self.cancellation,
                clock=self.clock,
            ),
            default_timeout_ms=self.config.default_timeout_ms,
            clock=self.clock,
        )
        ctx = CallContext(
            principal,
            api_key=api_key,
            run_id=run_id,
            agent_tools=agent_tools,
            session_id=session_id,
            metadata=metadata,
            timeout_ms=timeout_ms,
        )
        outcome = await stack.call(self.registry.entry_for(spec), arguments, ctx)
        if outcome.exception is not None and (outcome.status is CallStatus.DENIED or outcome.record is None):
            raise outcome.exception  # refused, or malformed (never recorded)
        assert outcome.record is not None
        return outcome.record


__all__ = ["CANCEL_WAIT_S", "DEFAULT_AUDIT", "Engine", "InvokeSource", "Invoke", "ToolDetails"]
