"""The one place the tool stack is composed, and its entry point.

From the outside in:

1. gate (`gate.py`): the one `Policy` decides (tool enabled, agent tool list, level against
   risk, API key scope and revocation). First, so a refused call costs no counter, no running row and no I/O but its
   denial record.
2. limits and budgets (`limited.py`): counted only for calls the gate let through.
3. execution record and audit (`recorded.py`): the admission transaction (with the gate's key
   re-check and the limit counters) and the outcome transaction. Everything inside it is part
   of the recorded call: a timeout, a rejected statement or bad arguments end as a stored outcome.
4. timeout and cancellation (`timeout.py`): one deadline for the whole call, retries included;
   cancel by id here or from another process.
5. retries (`retry.py`): only what is safe to repeat, each attempt inside the same deadline.
6. SQL guard (`sqlguard.py`): the agent's `security` block.
7. argument schema check (`schema.py`): once per call.
8. the catalogue (`catalogue.py`): the classified tools of the leaf sources, the MCP servers and
   the `python` servers of mcp.json (`combined.py`, `function_source.py`).

The SQL guard and the schema check need no I/O and judge the call itself, not the caller, so
`ToolStack.call` runs them (`ToolSource.check`) before the call enters the gate: a malformed call
is a usage error, answered at once with nothing recorded or counted, and the same whether the
caller is allowed to run the tool or not.

To add a concern, write a `WrappedSource` in its own module and place it here; to add an entry
point, open a runtime (`toolagent.runtime.open_runtime`) and call `runtime.tools.call`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.executions import new_execution_id, resolve_timeout_ms
from ..engine.limits import Limits
from ..errors import ToolAgentError
from ..model.bounds import DEFAULT_MAX_RESULT_BYTES
from ..model.entry import ToolEntry
from ..model.status import CallStatus
from ..policy import Policy
from .base import CallContext, CallOutcome, ToolCall, ToolSource
from .cancellation import Cancellation
from .gate import GateSource
from .limited import LimitedSource
from .recorded import RecordedSource
from .records import Recorder
from .retry import DEFAULT_ATTEMPTS, RetryingSource
from .schema import SchemaCheckedSource
from .sqlguard import SqlGuardedSource
from .timeout import TimeoutSource

#: Timeout of a call when neither the caller nor the tool's server config sets one.
DEFAULT_TIMEOUT_MS = 30_000


def build_tool_stack(
    inner: ToolSource,
    *,
    recorder: Recorder | None = None,
    limits: Limits | None = None,
    cancellation: Cancellation | None = None,
    retry_attempts: int = DEFAULT_ATTEMPTS,
    clock: Callable[[], float] = time.time,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    sql_tools_require_agent: bool = False,
    policy: Policy | None = None,
) -> ToolSource:
    """Compose the layers over `inner` in the order of the module docstring.

    Without a `recorder` the stack is ungoverned (no gate, limits or records): timeout, retries,
    SQL guard and schema check only — what a benchmark compares the governed stack with.
    `max_result_bytes` bounds the result each execution stores (`bounds.py`);
    `sql_tools_require_agent` refuses direct calls of SQL-taking tools made under no agent;
    `policy` is what the gate asks (default: `Policy()`, the matrix alone).
    """
    source: ToolSource = SchemaCheckedSource(inner)
    source = SqlGuardedSource(source, require_agent=sql_tools_require_agent)
    source = RetryingSource(source, attempts=retry_attempts)
    source = TimeoutSource(source, cancellation)
    if recorder is None:
        return source
    source = RecordedSource(source, recorder, clock, max_result_bytes)
    if limits is not None:
        source = LimitedSource(source, limits)
    return GateSource(source, recorder, policy or Policy())


@dataclass
class ToolStack:
    """The composed stack and how a call enters it."""

    source: ToolSource
    """The outermost layer."""
    default_timeout_ms: int = DEFAULT_TIMEOUT_MS
    """Timeout when neither the caller nor the server config sets one."""
    clock: Callable[[], float] = field(default=time.time)
    """Wall clock (seconds since the epoch): execution ids and start times."""

    async def resolve(self, name: str) -> ToolEntry:
        """The tool named `server/tool`.

        Raises:
            ServerUnavailable, UnknownTool: no such server or tool.
        """
        return await self.source.resolve(name)

    async def call(self, tool: str | ToolEntry, arguments: Mapping[str, Any], ctx: CallContext) -> CallOutcome:
        """Call one tool through every layer.

        Args:
            tool: `server/tool`, or an entry already resolved.
            arguments: Its arguments.
            ctx: Who calls and under which rules.

        Returns:
            The outcome (refusals, failures, timeouts and cancellations included; a call that
            fails its checks is `failed` with no execution id).

        Raises:
            UsageError: `ctx.timeout_ms` is out of range.
            ServerUnavailable, UnknownTool: the tool could not be resolved (nothing was recorded).
        """
        entry = tool if isinstance(tool, ToolEntry) else await self.resolve(tool)
        timeout_ms = resolve_timeout_ms(ctx.timeout_ms, entry.spec.timeout_s, self.default_timeout_ms)
        now = self.clock()
        call = ToolCall(entry, dict(arguments), new_execution_id(now), now, timeout_ms)
        try:
            await self.source.check(call, ctx)
        except ToolAgentError as exc:
            return CallOutcome(CallStatus.FAILED, call.name, error=exc.message, exception=exc)
        return await self.source.call_tool(call, ctx)


__all__ = ["DEFAULT_TIMEOUT_MS", "ToolStack", "build_tool_stack"]
