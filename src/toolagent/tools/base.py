"""The tool-source seam: `ToolSource`, the call records that cross it, and `WrappedSource`.

A `ToolSource` lists tools and calls one. Every cross-cutting concern (gate, limits, records,
timeout, retries, SQL guard, schema check) is a `WrappedSource`: a dataclass with one `inner`
field that forwards everything and overrides `call_tool`. `tools/stack.py` composes them, in
one place.

Records, not exceptions, cross the layers: a call ends as a `CallOutcome` (`ok`, `failed`,
`denied`, `timed_out` or `cancelled`). Exceptions steer control flow inside the stack (a layer
raises, an outer one turns it into the outcome); the one that ended a call rides on the outcome
as `exception`, so an entry point can answer with its error code.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..model.spec import ToolResult, ToolSpec
from ..model.status import CallStatus

if TYPE_CHECKING:
    from ..agents.models import Security
    from ..engine.principals import ApiKey, Principal
    from ..errors import ToolAgentError
    from ..model.entry import ToolEntry
    from ..model.execution import Execution
    from ..model.limits import LimitStatus
    from ..policy import Decision
    from ..store.db import Connection

#: A check or a count run inside the admission transaction (`admission.AdmissionCheck.admit`): it returns
#: a refusal (`Decision`), the limit counters it advanced, or None.
AdmissionHook = Callable[["Connection", "Execution"], "Decision | Sequence[LimitStatus] | None"]


@dataclass(frozen=True)
class CallContext:
    """Who calls, on whose behalf and under which rules; travels unchanged through every layer.

    Change it with `dataclasses.replace`.
    """

    principal: Principal
    """The caller (its level and plan are what the gate and the limits read)."""
    api_key: ApiKey | None = None
    """The key the caller authenticated with: checked for revocation and scope."""
    run_id: str | None = None
    """The BUILD run this call is a step of."""
    agent_tools: Sequence[str] | None = None
    """The agent's tool list (BUILD steps): every other tool is denied."""
    security: Security | None = None
    """The agent's `security` block: the SQL guard checks SQL-taking tools against it."""
    agent: str | None = None
    """`org/slug` of the agent a direct call is made under (its tool list and security block are
    `agent_tools` and `security`); stored in the execution's metadata and named in its audit rows."""
    session_id: str | None = None
    """The caller's session id (stored with the execution)."""
    metadata: Mapping[str, Any] | None = None
    """The caller's metadata (stored redacted)."""
    via: str | None = None
    """How the call came: `cli`, `api`, `gateway`, `worker` or `embedded` (policy rules read it);
    None: not said (a library caller)."""
    timeout_ms: int | None = None
    """1000..300000; None: the tool's server config, else the engine default."""
    on_admitted: Callable[[Execution], None] | None = field(default=None, compare=False)
    """Told the execution record once the call is admitted (before the tool is called); an
    entry point that answers before the call ends (async executeTool) waits for it."""
    settle_later: bool = False
    """The caller waits for the outcome's record itself (`CallOutcome.settle`) and may go on
    before it is stored: a BUILD step, whose run settles its steps' records before it ends. The
    outcome's write then rides with the next commit (the next step's admission)."""


@dataclass(frozen=True)
class ToolCall:
    """One call on its way down the stack."""

    entry: ToolEntry
    """The tool as the catalogue classified it (spec, category, risk)."""
    arguments: dict[str, Any]
    """Its arguments (as sent; stored redacted)."""
    execution_id: str
    """The id it is recorded under, chosen before anything runs."""
    started_s: float
    """When it was asked for (the runtime's clock, seconds since the epoch)."""
    timeout_ms: int
    """Its resolved deadline."""

    @property
    def name(self) -> str:
        """The qualified tool name."""
        return self.entry.spec.name

    @property
    def spec(self) -> ToolSpec:
        """The tool's spec."""
        return self.entry.spec


@dataclass(frozen=True)
class CallOutcome:
    """How one call ended; the record every layer and every entry point passes on."""

    status: CallStatus
    """`ok`, `failed` (the tool reported an error, or the call broke), `denied`, `timed_out`, `cancelled`."""
    tool: str
    """The qualified tool name."""
    execution_id: str | None = None
    """The execution record's id (None when no record layer is stacked)."""
    result: ToolResult | None = None
    """What the tool returned (kept when it reported an error)."""
    error: str | None = None
    """What went wrong, as a sentence."""
    reason: str | None = None
    """Why it was denied, timed out or cancelled."""
    denial: str | None = None
    """The denial code (`level`, `api_key_scope`, `rate_limited`, ...) of a refusal."""
    exception: ToolAgentError | None = field(default=None, compare=False)
    """The error that ended the call, when one did (for its HTTP status or exit code)."""
    duration_ms: float | None = None
    """How long the call itself ran (None when it never ran)."""
    ended_at: datetime | None = None
    """When it ended (UTC)."""
    limits: tuple[LimitStatus, ...] = field(default=(), compare=False)
    """Where the caller's limits stood once this call was counted."""
    record: Execution | None = field(default=None, compare=False, repr=False)
    """The execution as stored (or, until `settle` is awaited, as it will be)."""
    settle: Callable[[], Awaitable[Any]] | None = field(default=None, compare=False, repr=False)
    """Made with `CallContext.settle_later`: awaits the outcome's record being stored (and its
    event); it must be awaited."""

    @property
    def ok(self) -> bool:
        """The tool ran and did not report an error."""
        return self.status is CallStatus.OK


class ToolSource(ABC):
    """Lists tools and calls one; an async context manager (entering it is a no-op by default)."""

    @abstractmethod
    async def list_tools(self, ctx: CallContext | None = None) -> dict[str, ToolEntry]:
        """The tools this source offers, by qualified name."""

    @abstractmethod
    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """Call one tool.

        Raises:
            ToolAgentError: the call could not be made (an outer layer turns it into an outcome).
        """

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """Checks of the call that need no I/O and no record (arguments, SQL), run by the entry point
        before the call enters the stack; nothing by default.

        Raises:
            ToolAgentError: the call is malformed (a usage error: nothing is recorded or counted).
        """
        return None

    async def resolve(self, name: str) -> ToolEntry:
        """The tool named `name` (qualified).

        Raises:
            UnknownTool: no such tool.
        """
        entry = (await self.list_tools(None)).get(name)
        if entry is None:
            from ..errors import UnknownTool

            raise UnknownTool(f"no tool '{name}'")
        return entry

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None


@dataclass
class WrappedSource(ToolSource):
    """A source over another: forwards everything; a subclass overrides what its concern changes."""

    inner: ToolSource

    def __post_init__(self) -> None:
        # A method this layer does not override is the inner source's own, bound here: a call
        # then passes only through the layers that act on it, not a coroutine per layer that
        # merely forwards it (the per-call path crosses each layer up to three times).
        cls = type(self)
        for name in _FORWARDED:
            if getattr(cls, name) is getattr(WrappedSource, name):
                setattr(self, name, getattr(self.inner, name))

    async def list_tools(self, ctx: CallContext | None = None) -> dict[str, ToolEntry]:
        """The inner source's tools."""
        return await self.inner.list_tools(ctx)

    async def call_tool(self, call: ToolCall, ctx: CallContext) -> CallOutcome:
        """The inner source's call."""
        return await self.inner.call_tool(call, ctx)

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """The inner source's checks."""
        await self.inner.check(call, ctx)

    async def resolve(self, name: str) -> ToolEntry:
        """The inner source's tool."""
        return await self.inner.resolve(name)

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.inner.__aexit__(et, e, tb)


#: The methods a `WrappedSource` forwards unless it overrides them.
_FORWARDED = ("list_tools", "call_tool", "check", "resolve")


def result_outcome(call: ToolCall, result: ToolResult) -> CallOutcome:
    """The outcome of a tool that answered: `ok`, or `failed` when it reported an error."""
    if result.is_error:
        return CallOutcome(
            CallStatus.FAILED,
            call.name,
            call.execution_id,
            result=result,
            error=result.text or f"tool '{call.name}' reported an error",
        )
    return CallOutcome(CallStatus.OK, call.name, call.execution_id, result=result)


__all__ = ["AdmissionHook", "CallContext", "CallOutcome", "ToolCall", "ToolSource", "WrappedSource", "result_outcome"]
