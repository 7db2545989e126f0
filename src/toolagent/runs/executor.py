"""The step executor that sends every BUILD step through the execution engine.

The engine gates the call (permission level against risk, the agent's tool list, API key scope,
rate limit, budget), records it in history and audit, bounds it in time and makes it
cancellable by id; the pool performs the MCP call itself.
"""

from __future__ import annotations

from typing import Any

from ..errors import CallCancelled, ToolFailed, ToolTimedOut
from ..mcp.pool import ServerPool
from ..tools.spec import ToolResult, ToolSpec
from .runner import StepExecutor


def engine_executor(engine: Any, pool: ServerPool, principal: Any, *, api_key: Any = None) -> StepExecutor:
    """A `StepExecutor` running each step as `principal` through `engine.execute`."""

    async def execute(spec: ToolSpec, arguments: dict[str, Any], *, run_id: str, timeout_s: float,
                      agent_tools: list[str]) -> ToolResult:
        async def invoke(args: dict[str, Any]) -> ToolResult:
            # The engine owns the deadline (and cancels this call at it); no second timer here.
            return await pool.call(spec, args, timeout_s=None)

        timeout_ms = min(300_000, max(1_000, int(timeout_s * 1000)))
        execution = await engine.execute(
            spec, arguments, principal, invoke, timeout_ms=timeout_ms, run_id=run_id,
            agent_tools=agent_tools, api_key=api_key,
        )
        if execution.result is not None and execution.status in ("success", "failed"):
            return execution.result  # type: ignore[no-any-return]
        reason = execution.reason or execution.error or execution.status
        if execution.status == "cancelled" and "timeout" in str(reason):
            raise ToolTimedOut(spec.name, timeout_ms / 1000)
        if execution.status == "cancelled":
            raise CallCancelled(f"execution {execution.id} of '{spec.name}' was cancelled: {reason}")
        raise ToolFailed(spec.name, str(execution.error or reason))

    return execute
