"""The composition root: one `Runtime` per process, used by the CLI, the API, `toolagent.build()`,
the benchmarks and the tests.

```python
async with open_runtime(db=None, servers="mcp.json") as rt:
    me = await rt.principal()                      # --user, else the local user
    outcome = await rt.tools.call("supabase/get-schema", {}, CallContext(me))
    run = await rt.runner(CallContext(me)).run(plan, payload)
```

A runtime holds the store, the lifecycle event bus, principals, the catalogue over the MCP
server pool, the tool stack composed over it (`tools/stack.py`), cancellation, and the read
views. Starting it closes executions orphaned by dead processes and starts the cancellation
watcher; it must be started and stopped in the same task (`async with`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .engine.audit import AuditLog
from .engine.config import EngineConfig
from .engine.events import Event, EventBus
from .engine.history import History, HistoryPage, HistoryQuery
from .engine.limits import Clock, Limits
from .engine.logs import log_events
from .engine.metrics import Metrics, MetricsSnapshot
from .engine.principals import Principal, Principals
from .engine.reads import Reads, ToolDetails
from .engine.registry import Registry, ToolListing
from .model.bounds import ResultBounds
from .model.entry import ToolEntry
from .model.execution import Execution
from .model.limits import LimitStatus
from .policy import Policy
from .settings import Settings
from .store.executions import ExecutionStore, Owner
from .store.history import Stats
from .tools.admission import AdmissionCheck
from .tools.base import CallContext, ToolSource
from .tools.cancellation import CANCEL_WAIT_S, Cancellation
from .tools.catalogue import Catalogue
from .tools.combined import CombinedSource, LeafSource
from .tools.records import Recorder
from .tools.stack import ToolStack, build_tool_stack

if TYPE_CHECKING:
    from .mcp.config import ServersConfig
    from .mcp.pool import ServerPool
    from .runs.flow import FlowCap
    from .runs.runner import BuildRunner
    from .store import Store


class _DefaultAudit:
    """Sentinel: build an `AuditLog` on the runtime's store."""


DEFAULT_AUDIT = _DefaultAudit()


class Runtime:
    """Everything one process needs to govern tool calls and BUILD runs over one store."""

    def __init__(
        self,
        store: Store,
        *,
        config: EngineConfig | None = None,
        pool: ServerPool | None = None,
        sources: Sequence[LeafSource] = (),
        clock: Clock = time.time,
        audit: AuditLog | _DefaultAudit | None = DEFAULT_AUDIT,
        owner: Owner | None = None,
        flow_cap: FlowCap | None = None,
        bounds: ResultBounds | None = None,
        sql_tools_require_agent: bool | None = None,
        settings: Settings | None = None,
    ) -> None:
        """Args:
        store: The store (SQLite or PostgreSQL), migrated.
        config: Plans, limits, timeouts, tool overrides (default `EngineConfig()`; entry points
            pass `EngineConfig.load()`).
        pool: The MCP servers (entered by the caller); None: tools come from `catalogue.add`.
        sources: More leaf sources mounted beside the pool, e.g. `FunctionSource`s (entered by
            the caller). Raises ConfigError when two offer one namespace.
        clock: Wall clock in seconds since the epoch: timestamps, ids, rate windows, budgets.
        audit: Where decisions and outcomes go (default: the store's audit log; None: nowhere).
        owner: This process's identity on running rows (default: the current process).
        flow_cap: How much of a step's result later steps and deliverables see (default: from
            `settings`).
        bounds: Byte caps on stored and answered results and deliverables (default: from
            `settings`' `max_result_bytes` / `max_deliverable_bytes`).
        sql_tools_require_agent: Refuse direct calls of SQL-taking tools made under no agent
            (default: `settings.sql_tools_require_agent`, else off).
        settings: What this runtime runs with (caps, commit batching, flow bounds); default
            `Settings.defaults()`: a runtime never reads the environment (`open_runtime` does,
            when given none).
        """
        self.store = store
        self.db = store.db
        self.config = config or EngineConfig()
        self.clock = clock
        self.pool = pool
        self.settings = settings if settings is not None else Settings.defaults()
        if flow_cap is None:
            from .runs.flow import FlowCap

            flow_cap = FlowCap.from_settings(self.settings)
        self.flow_cap = flow_cap
        bounds = bounds or ResultBounds.from_settings(self.settings)
        if sql_tools_require_agent is None:
            sql_tools_require_agent = bool(self.settings.sql_tools_require_agent)
        self.bounds = bounds
        self.sql_tools_require_agent = sql_tools_require_agent
        self.events = EventBus()
        # One log line per lifecycle event on the `toolagent.lifecycle` logger: denials and failures
        # at warning (shown by default), the rest at info and debug (`TOOLAGENT_LOG_LEVEL`).
        log_events(self.events)
        self.principals = Principals(self.db, self.config)
        self.limits = Limits(self.db, self.config, clock=clock)
        self.executions = ExecutionStore(self.db)
        self.history_store = History(self.db)
        self.metrics_store = Metrics(self.db)
        self.audit: AuditLog | None = AuditLog(self.db) if isinstance(audit, _DefaultAudit) else audit
        self.owner = owner or Owner.current()
        window_s, batch_max = Recorder.batching_of(self.settings)
        self.recorder = Recorder(
            self.db, self.executions, self.audit, self.events, self.owner, window_s=window_s, batch_max=batch_max
        )
        self.cancellation = Cancellation(
            self.executions, self.recorder, self.owner, poll_s=self.config.cancel_poll_ms / 1000, clock=clock
        )
        leaves = [leaf for leaf in (pool, *sources) if leaf is not None]
        inner = CombinedSource(leaves) if len(leaves) > 1 else (leaves[0] if leaves else None)
        self.catalogue = Catalogue(inner, self.config, on_registered=self._registered)
        # The one decision, asked by the gate, the queued admission, the BUILD pre-check and
        # every listing, so that a listing shows what the caller can really run.
        self.policy = Policy()
        self.tools = self.stack_over(self.catalogue)
        self.reads = Reads(
            self.config,
            self.executions,
            self.history_store,
            self.metrics_store,
            self.limits,
            self.catalogue,
            clock,
            self.policy,
        )
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._pending: list[Event] = []

    def stack_over(
        self, inner: ToolSource, *, recorder: Recorder | None = None, checks: Sequence[AdmissionCheck] | None = None
    ) -> ToolStack:
        """The governed tool stack over `inner`, with this runtime's parts (limits, cancellation,
        clock, caps, policy): the one place a runtime composes it (`build_tool_stack`).

        Args:
            inner: The innermost source (the catalogue, or a caller's own).
            recorder: Where its records go (default: the runtime's recorder).
            checks: The admission checks in order (default: the policy, then the limits).
        """
        return ToolStack(
            build_tool_stack(
                inner,
                recorder=recorder or self.recorder,
                limits=self.limits,
                cancellation=self.cancellation,
                clock=self.clock,
                max_result_bytes=self.bounds.max_result_bytes,
                sql_tools_require_agent=self.sql_tools_require_agent,
                policy=self.policy,
                checks=checks,
            ),
            default_timeout_ms=self.config.default_timeout_ms,
            clock=self.clock,
        )

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Between `start` and `aclose`."""
        return self._tg is not None

    async def start(self) -> list[str]:
        """Close executions orphaned by dead processes and start the cancellation watcher.

        Returns:
            The ids of the executions closed as interrupted.
        """
        if self._tg is not None:
            return []
        if self.audit is not None:
            await self.audit.check_key()  # a writer without the chain's key refuses before writing anything
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(anyio.create_task_group())
        try:
            closed = await self.cancellation.start()
        except BaseException:
            await stack.aclose()
            raise
        stack.push_async_callback(self.cancellation.aclose)
        self._stack, self._tg = stack, tg
        pending, self._pending = self._pending, []
        for event in pending:
            tg.start_soon(self.events.emit, event)
        return closed

    async def aclose(self) -> None:
        """Stop the watcher (running calls are not cancelled: their callers own them)."""
        stack, tg = self._stack, self._tg
        self._stack = self._tg = None
        self.principals.close()
        if tg is not None and stack is not None:
            tg.cancel_scope.cancel()
            await stack.aclose()

    async def __aenter__(self) -> Runtime:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _registered(self, entry: ToolEntry) -> None:
        event = Event(
            "tool_registered",
            tool=entry.name,
            data={"category": entry.category, "risk": entry.risk, "riskSource": entry.risk_source},
        )
        if self._tg is not None:
            self._tg.start_soon(self.events.emit, event)
        else:
            self._pending.append(event)

    # -- callers ----------------------------------------------------------------------------------

    @property
    def registry(self) -> Registry:
        """The catalogue's classification of the listed tools."""
        return self.catalogue.registry

    async def principal(self, user: str | None = None) -> Principal:
        """The named user, else the local user (created on first use at the config's local level).

        Raises:
            NotFound: `user` names no user.
        """
        return await self.principals.resolve_cli_user(user)

    def runner(
        self, context: CallContext, *, max_concurrency: int | None = None, default_timeout_s: float | None = None
    ) -> BuildRunner:
        """A BUILD runner whose every step goes through this runtime's tool stack as `context`'s caller."""
        from .runs.runner import DEFAULT_MAX_CONCURRENCY, BuildRunner

        return BuildRunner(
            self.tools,
            self.store,
            context,
            default_timeout_s=default_timeout_s,
            max_concurrency=max_concurrency or DEFAULT_MAX_CONCURRENCY,
            flow_cap=self.flow_cap,
            bounds=self.bounds,
        )

    # -- cancellation and reads (see `tools/cancellation.py` and `engine/reads.py`) -----------------

    async def get_execution(self, execution_id: str, principal: Principal) -> Execution:
        """One execution of `principal` (any, for an admin). Raises NotFound."""
        return await self.cancellation.get(execution_id, principal)

    async def cancel(self, execution_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> Execution:
        """Cancel a running execution here or in another process (see `Cancellation.cancel`); a
        call submitted to the workers is cancelled before it starts, or aborted on its worker."""
        if not self.db.is_sqlite:
            execution = await self.cancellation.get(execution_id, principal)
            from .workers.calls import cancel_call, on_a_worker

            if on_a_worker(execution):
                cancelled = await cancel_call(self, execution, principal.name)
                if cancelled is not None:
                    return cancelled
        return await self.cancellation.cancel(execution_id, principal, wait_s=wait_s)

    async def cancel_run(self, run_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> list[str]:
        """Cancel every running execution of a BUILD run (see `Cancellation.cancel_run`)."""
        return await self.cancellation.cancel_run(run_id, principal, wait_s=wait_s)

    async def run_in_scope(self, run_id: str, principal: Principal, tools: Sequence[str]) -> bool:
        """Whether a run calling `tools` stays within the principal's key categories (see `Reads`)."""
        return await self.reads.run_in_scope(run_id, principal, tools)

    async def active(self, principal: Principal) -> list[Execution]:
        """Running executions of `principal` (everyone's, for an admin)."""
        return await self.reads.active(principal)

    async def history(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> HistoryPage:
        """A page of history with its statistics."""
        return await self.reads.history(principal, filters, **kwargs)

    async def stats(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> Stats:
        """Statistics of the executions `filters` match."""
        return await self.reads.stats(principal, filters, **kwargs)

    async def metrics(
        self, tool: str | None = None, *, principal: Principal | None = None, categories: frozenset[str] | None = None
    ) -> MetricsSnapshot:
        """Every figure (about one tool), scoped to `principal` when given, else to `categories`."""
        return await self.reads.metrics(tool, principal=principal, categories=categories)

    async def list_tools(self, principal: Principal | None = None, **filters: Any) -> ToolListing:
        """Discovery over the listed tools (filters as `Reads.list_tools`)."""
        return await self.reads.list_tools(principal, **filters)

    async def tool_details(self, name: str, principal: Principal) -> ToolDetails:
        """A tool with its schema, its metrics and the caller's own figures for it."""
        return await self.reads.tool_details(name, principal)

    async def limit_status(self, principal: Principal, *, tool: str | None = None) -> list[LimitStatus]:
        """Where `principal`'s rate limits and budget stand."""
        return await self.reads.limit_status(principal, tool=tool)

    async def prune(self, older_than_days: int | None = None) -> int:
        """Delete executions that ended long enough ago; returns how many."""
        return await self.reads.prune(older_than_days)


@contextlib.asynccontextmanager
async def open_runtime(
    db: str | None = None,
    servers: str | ServersConfig | None = None,
    *,
    config: EngineConfig | None = None,
    store: Store | None = None,
    on_store: Callable[[Store], Any] | None = None,
    on_starting: Callable[[str, float], None] | None = None,
    settings: Settings | None = None,
    **options: Any,
) -> AsyncIterator[Runtime]:
    """Open the store (unless given), start the runtime, then enter the server pool.

    Args:
        db: Store URL (default: `TOOLAGENT_DATABASE_URL` or the embedded SQLite file).
        servers: An `mcpServers` file path, a loaded config, or None for the default lookup.
        config: The engine config (default: `EngineConfig.load()`).
        store: An open store to use instead of opening `db`.
        on_store: Awaited with the store before anything else (e.g. seeding).
        on_starting: Told when an MCP server takes long to start (name, limit in seconds).
        settings: What the runtime runs with (default: read from the environment, once, here:
            this is the library's entry point).
        **options: Passed on to `Runtime` (`clock`, `audit`, `owner`, `flow_cap`).

    Raises:
        ConfigError: the engine or server config is invalid (before anything starts).
    """
    from .mcp.config import ServersConfig
    from .mcp.pool import ServerPool
    from .store import open_store
    from .tools.python_servers import in_process_connector, load_python_servers, pool_config

    settings = settings if settings is not None else Settings.from_env()
    servers_config = servers if isinstance(servers, ServersConfig) else ServersConfig.load(servers)
    engine_config = config or EngineConfig.load()
    # `python` servers are imported only now, once both configs are valid (ConfigError if one fails).
    python_servers = await load_python_servers(servers_config)
    mcp_config = pool_config(servers_config, python_servers)
    async with contextlib.AsyncExitStack() as stack:
        if store is None:
            store = await stack.enter_async_context(open_store(db))
        if on_store is not None:
            result = on_store(store)
            if result is not None and hasattr(result, "__await__"):
                await result
        connector = in_process_connector(python_servers.servers, mcp_config) if python_servers.servers else None
        pool = ServerPool(mcp_config, on_starting=on_starting, connector=connector)
        runtime = await stack.enter_async_context(
            Runtime(
                store, config=engine_config, pool=pool, sources=python_servers.functions, settings=settings, **options
            )
        )
        await stack.enter_async_context(pool)
        for source in python_servers.functions:
            await stack.enter_async_context(source)
        yield runtime


__all__ = ["DEFAULT_AUDIT", "Runtime", "open_runtime"]
