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
from typing import Any

from ..errors import UsageError
from ..runtime import DEFAULT_AUDIT, Runtime
from ..status import CallStatus
from ..store.execution_record import Execution
from ..tools.base import CallContext, ToolSource
from ..tools.cancellation import CANCEL_WAIT_S
from ..tools.catalogue import Catalogue
from ..tools.function_source import FunctionSource, FunctionTool
from ..tools.spec import ToolResult, ToolSpec
from ..tools.stack import ToolStack, build_tool_stack
from .principals import ApiKey, Principal
from .reads import ToolDetails

Invoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


def InvokeSource(spec: ToolSpec, invoke: Invoke) -> ToolSource:  # noqa: N802 (was a class; kept for callers)
    """An innermost source whose one tool, `spec`, is performed by `invoke(arguments)` (its errors
    propagate to the outer layers, as a transport's would): a `FunctionSource` under a catalogue."""
    tool = FunctionTool.from_handler(spec.tool, invoke, input_schema=spec.input_schema)
    return Catalogue(FunctionSource(spec.server, [tool], origin=f"the caller's function for '{spec.name}'"))


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
                InvokeSource(spec, invoke),
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
