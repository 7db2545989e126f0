"""The one place the tool stack is composed, and its entry point.

From the outside in:

1. execution record and audit (`recorded.py`), with the admission checks (`admission.py`): first,
   before any I/O, the one `Policy` decides (tool enabled, agent tool list, level against risk,
   API key scope and revocation), so a refused call costs no counter, no running row and no I/O
   but its denial record; then the admission transaction (the key read again, the limit counters,
   any further checks, the `running` row) and, after the call, the outcome transaction.
   Everything inside it is part of the recorded call: a timeout, a rejected statement or bad
   arguments end as a stored outcome.
2. timeout and cancellation (`timeout.py`): one deadline for the whole call, retries included;
   cancel by id here or from another process.
3. retries (`retry.py`): only what is safe to repeat, each attempt inside the same deadline.
4. SQL guard (`sqlguard.py`): the agent's `security` block.
5. argument schema check (`schema.py`): once per call.
6. the catalogue (`catalogue.py`): the classified tools of the leaf sources, the MCP servers and
   the `python` servers of mcp.json (`combined.py`, `function_source.py`).

The SQL guard and the schema check need no I/O and judge the call itself, not the caller, so
`ToolStack.call` runs them (`ToolSource.check`) before the call is admitted, and only for a caller
the policy lets through: a malformed call is a usage error, answered at once with nothing recorded
or counted.

To add a check that decides whether a call may run, write an `AdmissionCheck` and add it to
`checks`; to add a concern around the call itself, write a `WrappedSource` in its own module
and place it here; to add an entry point, open a runtime (`toolagent.runtime.open_runtime`) and
call `runtime.tools.call`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.executions import new_execution_id, resolve_timeout_ms
from ..engine.limits import Limits
from ..errors import ToolAgentError
from ..model.bounds import DEFAULT_MAX_RESULT_BYTES
from ..model.entry import ToolEntry
from ..model.status import CallStatus
from ..policy import Policy
from .admission import AdmissionCheck, LimitCheck, PolicyCheck
from .base import CallContext, CallOutcome, ToolCall, ToolSource
from .cancellation import Cancellation
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
    checks: Sequence[AdmissionCheck] | None = None,
) -> ToolSource:
    """Compose the layers over `inner` in the order of the module docstring.

    Without a `recorder` the stack is ungoverned (no policy, limits or records): timeout, retries,
    SQL guard and schema check only — what a benchmark compares the governed stack with.
    `max_result_bytes` bounds the result each execution stores (`bounds.py`);
    `sql_tools_require_agent` refuses direct calls of SQL-taking tools made under no agent;
    `checks` are what a call must pass before it runs, in order (`admission.py`); by default the
    `policy` (default `Policy()`, the matrix alone) and then the `limits`.
    """
    source: ToolSource = SchemaCheckedSource(inner)
    source = SqlGuardedSource(source, require_agent=sql_tools_require_agent)
    source = RetryingSource(source, attempts=retry_attempts)
    source = TimeoutSource(source, cancellation)
    if recorder is None:
        return source
    if checks is None:
        checks = [PolicyCheck(policy or Policy())]
        if limits is not None:
            checks.append(LimitCheck(limits))
    return RecordedSource(source, recorder, clock, max_result_bytes, tuple(checks))


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
