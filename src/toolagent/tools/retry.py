"""Retries of calls that are safe to repeat, driven by the errors' `retryable` flag.

A call is sent again only when repeating it cannot write twice:

- the error says the call never left this process (`ServerUnavailable`: the server could not
  be reached or started, so nothing was sent), whatever the tool; or
- the error is `retryable` (a transport or protocol failure, a timeout of the request) and the
  tool only reads: rated `safe`, or annotated `read_only_hint` by a server the operator trusts.

A write whose request may have reached the server is never repeated: it may have run. The
deadline of the timeout layer above bounds every attempt together.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from ..errors import ServerUnavailable, ToolCallError
from .base import CallContext, CallOutcome, ToolCall, WrappedSource

#: Attempts in all (the first call included).
DEFAULT_ATTEMPTS = 3
#: First wait between attempts, doubled each time up to `MAX_WAIT_S`.
FIRST_WAIT_S = 0.05
MAX_WAIT_S = 1.0


def safe_to_repeat(call: ToolCall, exc: BaseException) -> bool:
    """Whether `call`, which raised `exc`, may be sent again (see the module docstring)."""
    if not isinstance(exc, ToolCallError) or not exc.retryable:
        return False
    if isinstance(exc, ServerUnavailable):
        return True
    spec = call.entry.spec
    return call.entry.risk == "safe" or (spec.trusted and spec.annotations.get("read_only_hint") is True)


@dataclass
class RetryingSource(WrappedSource):
    """Sends a call again after an error when that is safe (see the module docstring)."""

    attempts: int = DEFAULT_ATTEMPTS
    first_wait_s: float = FIRST_WAIT_S
    max_wait_s: float = MAX_WAIT_S

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """The inner call, repeated while it raises an error that is safe to retry."""
        try:
            # The first attempt runs bare: most calls succeed, and they pay nothing for retrying.
            return await self.inner.call_tool(call, ctx)
        except ToolCallError as exc:
            if self.attempts <= 1 or not safe_to_repeat(call, exc):
                raise
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.attempts - 1),
            wait=wait_exponential(multiplier=self.first_wait_s, max=self.max_wait_s),
            retry=retry_if_exception(lambda exc: safe_to_repeat(call, exc)),
            sleep=anyio.sleep,
            reraise=True,
        )
        await anyio.sleep(min(self.first_wait_s, self.max_wait_s))
        async for attempt in retrying:
            with attempt:
                return await self.inner.call_tool(call, ctx)
        raise AssertionError("unreachable: tenacity re-raises the last error")  # pragma: no cover


__all__ = ["DEFAULT_ATTEMPTS", "RetryingSource", "safe_to_repeat"]
