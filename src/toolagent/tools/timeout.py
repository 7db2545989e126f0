"""Timeout and cancellation: each call runs under a cancel scope whose deadline is its timeout.

The scope is registered with `Cancellation` under the execution id, so a cancel by id (here, or
from another process through the store) cancels it like the deadline does. Either way the task
awaiting the MCP response is cancelled, and the MCP SDK sends `notifications/cancelled` to the
server. A transport error raised while the call is being abandoned is the abandonment's doing,
so it ends the call as timed out or cancelled, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from ..errors import ToolCallError, ToolTimedOut
from ..model.status import CallStatus
from .base import CallContext, CallOutcome, ToolCall, WrappedSource
from .cancellation import Active, Cancellation


@dataclass
class TimeoutSource(WrappedSource):
    """Bounds each call by `call.timeout_ms` and makes it cancellable by id."""

    cancellation: Cancellation | None = None

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Run the inner call under its deadline; answer `timed_out` or `cancelled` when stopped."""
        scope = anyio.CancelScope(deadline=anyio.current_time() + call.timeout_ms / 1000)
        active = (
            self.cancellation.register(call.execution_id, ctx.principal.name, ctx.run_id, scope)
            if self.cancellation is not None
            else None
        )
        try:
            outcome: CallOutcome | None = None
            with scope:
                outcome = await self.inner.call_tool(call, ctx)
            if outcome is None or scope.cancelled_caught:
                return self._stopped(call, active)
            return outcome
        except ToolTimedOut:
            return self._stopped(call, None)
        except ToolCallError:
            if scope.cancel_called:
                return self._stopped(call, active)
            raise
        finally:
            if active is not None and self.cancellation is not None:
                self.cancellation.release(active)

    @staticmethod
    def _stopped(call: ToolCall, active: Active | None) -> CallOutcome:
        """A call our own scope abandoned: cancelled by someone, else timed out."""
        if active is not None and active.cancelled_by is not None:
            return CallOutcome(
                CallStatus.CANCELLED, call.name, call.execution_id, reason=f"cancelled by {active.cancelled_by}"
            )
        return CallOutcome(
            CallStatus.TIMED_OUT,
            call.name,
            call.execution_id,
            reason=f"timeout after {call.timeout_ms} ms",
            error=f"tool '{call.name}' timed out after {call.timeout_ms} ms",
        )


__all__ = ["TimeoutSource"]
