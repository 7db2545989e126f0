"""The Engine: gate, record, bound in time, make cancellable, and account for every tool call.

```python
async with open_store(url) as store, Engine(store, config=EngineConfig.load()) as engine:
    engine.registry.update(specs)
    principal = await engine.principals.resolve_cli_user(None)
    execution = await engine.execute(spec, {"path": "/tmp/x"}, principal, invoke)
```

`execute` runs, in order: the pure gate (`permissions.decide`: enabled, agent tool list, level
against risk, API key), then — in one transaction — the rate limits and budget and the insert
of the `running` record, then the call itself under a cancel scope with the timeout as its
deadline. The scope is registered under the execution id, so `cancel(id)` in this process
cancels it at once; a cancellation asked for by another process is a flag on the row that one
watcher task per engine polls for (every `cancel_poll_ms`) while this engine has executions
running. Abandoning the call cancels the task awaiting the MCP response, and the MCP SDK then
sends `notifications/cancelled` to the server itself.

Every decision and outcome is appended to the audit log and emitted on `engine.events`. Final
writes happen inside a cancellation shield, so a cancelled caller never loses its history entry.

The engine must be started (`async with engine:` or `await engine.start()` ... `await
engine.aclose()` in the same task): starting closes executions orphaned by dead processes and
starts the watcher.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import sqlalchemy as sa

from ..errors import BudgetExceeded, NotFound, RateLimited, StoreError, ToolCallError, ToolTimedOut, UsageError
from ..tools.spec import ToolResult, ToolSpec
from .audit import AuditEntry, AuditLog
from .config import EngineConfig
from .events import Event, EventBus
from .executions import Execution, ExecutionStore, Owner, new_execution_id, pid_alive, resolve_timeout_ms
from .history import History, HistoryPage, HistoryQuery, Stats
from .limits import Clock, Limits, LimitStatus
from .logs import log_context, log_events
from .metrics import Metrics, MetricsSnapshot, ToolMetrics, UserMetrics
from .permissions import DENIAL_BUDGET, DENIAL_RATE_LIMITED, Decision, ExecutionDenied, can_run, decide, parse_category
from .principals import ApiKey, Principal, Principals
from .redaction import redact, redact_text, remember_secrets
from .registry import Registry, ToolEntry, ToolListing

if TYPE_CHECKING:
    from ..store import Store

logger = logging.getLogger("toolagent.engine.core")

#: How long `cancel` waits for the execution to end before returning it as it is.
CANCEL_WAIT_S = 5.0

Invoke = Callable[[dict[str, Any]], Awaitable[ToolResult]]


class _DefaultAudit:
    """Sentinel: build an `AuditLog` on the engine's store."""


DEFAULT_AUDIT = _DefaultAudit()


@dataclass
class _Active:
    """An execution running in this engine: its cancel scope and who cancelled it."""

    execution: Execution
    scope: anyio.CancelScope
    done: anyio.Event = field(default_factory=anyio.Event)
    cancelled_by: str | None = None

    def cancel(self, by: str) -> None:
        if self.cancelled_by is None:
            self.cancelled_by = by
        self.scope.cancel()


@dataclass(frozen=True)
class ToolDetails:
    """getToolDetails: the tool with its schema, its metrics and the caller's own figures."""

    tool: ToolEntry
    """The registered tool."""
    metrics: ToolMetrics
    """Everyone's figures for it."""
    user_stats: UserMetrics
    """The caller's figures for it."""
    runnable: bool
    """Whether the caller's level may run it (and it is enabled)."""

    def to_json(self) -> dict[str, Any]:
        """API form: `tool`, `metrics`, `userStats`."""
        return {"tool": self.tool.to_json(runnable=self.runnable), "metrics": self.metrics.to_json(),
                "userStats": self.user_stats.to_json()}


class Engine:
    """The execution engine over one store."""

    def __init__(
        self,
        store: Store,
        *,
        config: EngineConfig | None = None,
        clock: Clock = time.time,
        audit: AuditLog | _DefaultAudit | None = DEFAULT_AUDIT,
        owner: Owner | None = None,
    ) -> None:
        """Args:
            store: The store (SQLite or PostgreSQL), migrated.
            config: Plans, limits, timeouts (default: `EngineConfig()`; the CLI passes `EngineConfig.load()`).
            clock: Wall clock in seconds since the epoch: timestamps, ids, rate windows and budgets.
            audit: Where decisions and outcomes go (default: the store's audit log; None: nowhere).
            owner: This process's identity on running rows (default: the current process).
        """
        self.store = store
        self.db = store.db
        self.config = config or EngineConfig()
        self.clock = clock
        self.events = EventBus()
        # One log line per lifecycle event, on the `toolagent.lifecycle` logger: denials and failures
        # at warning (shown by default), the rest at info and debug (`TOOLAGENT_LOG_LEVEL`).
        log_events(self.events)
        self.registry = Registry(self.config, on_registered=self._registered)
        self.principals = Principals(self.db, self.config)
        self.limits = Limits(self.db, self.config, clock=clock)
        self.executions = ExecutionStore(self.db)
        self.history_store = History(self.db)
        self.metrics_store = Metrics(self.db)
        self.audit: AuditLog | None = AuditLog(self.db) if isinstance(audit, _DefaultAudit) else audit
        self.owner = owner or Owner.current()
        self._active: dict[str, _Active] = {}
        self._wake = anyio.Event()
        self._stack: AsyncExitStack | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._pending: list[Event] = []

    # -- lifecycle -----------------------------------------------------------------------------

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
        closed = await self._close_interrupted()
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(anyio.create_task_group())
        self._stack, self._tg = stack, tg
        tg.start_soon(self._watch)
        pending, self._pending = self._pending, []
        for event in pending:
            tg.start_soon(self.events.emit, event)
        return closed

    async def aclose(self) -> None:
        """Stop the watcher (running executions are not cancelled: their callers own them)."""
        stack, tg = self._stack, self._tg
        self._stack = self._tg = None
        if tg is not None and stack is not None:
            tg.cancel_scope.cancel()
            await stack.aclose()

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _close_interrupted(self) -> list[str]:
        closed = await self.executions.close_interrupted(self.owner, self._now())
        for execution_id in closed:
            execution = await self.executions.get(execution_id)
            if execution is not None:
                await self._audit_outcome(execution)
        if closed:
            logger.warning("closed %d interrupted executions: %s", len(closed), ", ".join(closed))
        return closed

    async def _watch(self) -> None:
        interval_s = self.config.cancel_poll_ms / 1000
        while True:
            if not self._active:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            try:
                # Shielded: a read cut short leaves SQLAlchemy closing its connection in a task of
                # its own, which can outlive the store when the engine stops; stop between reads.
                with anyio.CancelScope(shield=True):
                    requests = await self.executions.cancel_requests(list(self._active))
            except StoreError:
                logger.exception("could not read cancellation requests; retrying")
                requests = {}
            for execution_id, by in requests.items():
                active = self._active.get(execution_id)
                if active is not None:
                    active.cancel(by)
            await anyio.sleep(interval_s)

    def _registered(self, entry: ToolEntry) -> None:
        event = Event("tool_registered", tool=entry.name,
                      data={"category": entry.category, "risk": entry.risk, "riskSource": entry.risk_source})
        if self._tg is not None:
            self._tg.start_soon(self.events.emit, event)
        else:
            self._pending.append(event)

    # -- helpers ------------------------------------------------------------------------------

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    # -- the audit and event hooks ------------------------------------------------------------

    @staticmethod
    def _decision_entry(execution: Execution, *, allowed: bool, reason: str | None = None) -> AuditEntry:
        return AuditEntry(
            principal=execution.user, api_key_id=execution.api_key_id, tool=execution.tool, risk=execution.risk,
            level=execution.level, decision="allow" if allowed else "deny", reason=reason, arguments=execution.arguments,
            outcome=None if allowed else "denied", started_at=execution.started_at,
            ended_at=None if allowed else execution.started_at, run_id=execution.run_id, execution_id=execution.id,
            event="decision",
        )

    @staticmethod
    def _outcome_entry(execution: Execution) -> AuditEntry:
        return AuditEntry(
            principal=execution.user, api_key_id=execution.api_key_id, tool=execution.tool, risk=execution.risk,
            level=execution.level, reason=execution.reason or execution.error, arguments=execution.arguments,
            outcome=execution.status,  # type: ignore[arg-type]
            started_at=execution.started_at, ended_at=execution.ended_at, duration_ms=execution.duration_ms,
            run_id=execution.run_id, execution_id=execution.id, event="outcome",
        )

    def _audit_in(self, conn: sa.Connection, entry: AuditEntry) -> None:
        if self.audit is not None:
            self.audit.append_in(conn, entry)

    async def _audit_outcome(self, execution: Execution) -> None:
        if self.audit is not None:
            await self.audit.append(self._outcome_entry(execution))

    async def _emit(self, kind: str, execution: Execution, **extra: Any) -> None:
        await self.events.emit(Event(
            kind,  # type: ignore[arg-type]
            execution_id=execution.id, run_id=execution.run_id, tool=execution.tool, user=execution.user,
            data={"category": execution.category, "risk": execution.risk, "level": execution.level,
                  "apiKeyId": execution.api_key_id, "sessionId": execution.session_id, "timeoutMs": execution.timeout_ms},
            **extra,
        ))

    # -- execute ------------------------------------------------------------------------------

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
        """Gate, record and run one tool call.

        Args:
            spec: The tool (from the MCP pool).
            arguments: Its arguments (stored redacted).
            principal: Who calls.
            invoke: Performs the call (`pool.call`); may raise `ToolCallError` subclasses.
            timeout_ms: 1000..300000; default: the tool's server config, else the engine default.
            run_id: The BUILD run this is a step of.
            agent_tools: The agent's tool list (BUILD steps): other tools are denied.
            api_key: The key the caller authenticated with (checked for revocation and scope).
            session_id: The caller's session (execution context).
            metadata: The caller's metadata (stored redacted).

        Returns:
            The finished execution: `success`, `failed` (also when the tool reported an error;
            its result is kept) or `cancelled` (timeout, cancel by id, or a cancelled run).

        Raises:
            UsageError: The timeout is out of range, or the engine is not started.
            ExecutionDenied: (FORBIDDEN) the gate refused; recorded, never sent.
            RateLimited, BudgetExceeded: (TOO_MANY_REQUESTS) a limit refused; recorded, never sent.
        """
        if self._tg is None:
            raise UsageError("the engine is not started: use `async with Engine(...)` or `await engine.start()` first")
        # The call's own secrets are masked wherever they come back (its result, its log lines).
        remember_secrets(arguments, metadata)
        timeout = resolve_timeout_ms(timeout_ms, spec.timeout_s, self.config.default_timeout_ms)
        entry = self.registry.entry_for(spec)
        now_s = self.clock()
        execution = Execution(
            id=new_execution_id(now_s), tool=spec.name, category=entry.category, risk=entry.risk, status="running",
            user=principal.name, started_at=datetime.fromtimestamp(now_s, UTC), level=principal.level,
            api_key_id=api_key.id if api_key is not None else None, session_id=session_id, run_id=run_id,
            metadata=redact(dict(metadata)) if metadata is not None else None, arguments=redact(arguments),
            timeout_ms=timeout, owner=self.owner,
        )
        gate = functools.partial(
            decide, user=principal.name, level=principal.level, tool=spec.name, risk=entry.risk,
            category=entry.category, enabled=entry.enabled, agent_tools=agent_tools,
            key_id=api_key.id if api_key else None,
        )
        decision = gate(key_revoked_at=api_key.revoked_at if api_key else None,
                        key_scopes=api_key.scopes if api_key else None)
        if decision.allowed:
            try:
                # Shielded: once the running row commits, `_run` must get to close it. A cancellation
                # of the caller meanwhile is delivered at `_run`'s first checkpoint and recorded there.
                with anyio.CancelScope(shield=True):
                    admitted = await self._admit(execution, principal, gate, api_key)
            except RateLimited as exc:
                await self._deny(execution, DENIAL_RATE_LIMITED, exc.message)
                raise
            except BudgetExceeded as exc:
                await self._deny(execution, DENIAL_BUDGET, exc.message)
                raise
            if isinstance(admitted, Execution):
                if admitted.status != "running":
                    return admitted
                return await self._run(admitted, arguments, invoke)
            decision = admitted
        await self._deny(execution, decision.code or "denied", decision.reason or "denied")
        raise ExecutionDenied(decision, tool=spec.name, level=principal.level, risk=entry.risk,
                              execution_id=execution.id)

    async def _deny(self, execution: Execution, code: str, reason: str) -> None:
        denied = replace(execution, status="failed", denied=True, denial=code, reason=reason, error=reason,
                         ended_at=execution.started_at)
        with anyio.CancelScope(shield=True):
            await self.db.write(self._record_in, denied, self._decision_entry(denied, allowed=False, reason=reason))
            await self._emit("execution_denied", denied, status="denied", reason=reason)

    def _record_in(self, conn: sa.Connection, execution: Execution, entry: AuditEntry) -> None:
        self.executions.insert(conn, execution)
        self._audit_in(conn, entry)

    async def _admit(self, execution: Execution, principal: Principal, gate: Callable[..., Decision],
                     api_key: ApiKey | None) -> Execution | Decision:
        """In one transaction: re-check the API key (it may have been revoked since the caller
        authenticated), count the call against the limits, insert it `running` and audit the
        decision — or, when its run was cancelled, record it `cancelled` without counting it.

        Returns:
            The execution as recorded, or the gate's refusal when the key no longer passes.
        """
        admitted = await self.db.write(self._admit_in, execution, principal, gate, api_key)
        if isinstance(admitted, Execution) and admitted.status == "cancelled":
            with anyio.CancelScope(shield=True):
                await self._emit("execution_cancelled", admitted, status="cancelled", reason=admitted.reason)
        return admitted

    def _admit_in(self, conn: sa.Connection, execution: Execution, principal: Principal,
                  gate: Callable[..., Decision], api_key: ApiKey | None) -> Execution | Decision:
        if api_key is not None:
            fresh = self.principals.key_in(conn, api_key.id)
            decision = gate(key_revoked_at=fresh.revoked_at if fresh else api_key.revoked_at or self._now(),
                            key_scopes=(fresh or api_key).scopes)
            if not decision.allowed:
                return decision
        by = None if execution.run_id is None else self.executions.run_cancelled_by(conn, execution.run_id)
        if by is None:
            counted = self.limits.consume(conn, principal.name, principal.plan, tool=execution.tool,
                                          category=execution.category)
            self.executions.insert(conn, execution)
            self._audit_in(conn, self._decision_entry(execution, allowed=True))
            return replace(execution, limits=tuple(counted))
        cancelled = replace(execution, status="cancelled", ended_at=execution.started_at,
                            reason=f"run {execution.run_id} was cancelled by {by}")
        self.executions.insert(conn, cancelled)
        self._audit_in(conn, self._outcome_entry(cancelled))
        return cancelled

    async def _run(self, execution: Execution, arguments: dict[str, Any], invoke: Invoke) -> Execution:
        scope = anyio.CancelScope(deadline=anyio.current_time() + execution.timeout_ms / 1000)  # type: ignore[operator]
        active = self._active[execution.id] = _Active(execution, scope)
        self._wake.set()
        started = time.perf_counter()
        with log_context(execution_id=execution.id, tool=execution.tool, user=execution.user, run_id=execution.run_id):
            return await self._call(execution, arguments, invoke, scope, active, started)

    async def _call(self, execution: Execution, arguments: dict[str, Any], invoke: Invoke, scope: anyio.CancelScope,
                    active: _Active, started: float) -> Execution:
        """`_run`'s call and outcome; every line logged meanwhile carries the execution's context."""
        try:
            await self._emit("execution_started", execution)
            result: ToolResult | None = None
            with scope:
                result = await invoke(arguments)
            if result is None or scope.cancelled_caught:
                outcome = self._stopped(execution, started, active)
            elif result.is_error:
                outcome = self._ended(execution, started, "failed", result=result,
                                      error=result.text or f"tool '{execution.tool}' reported an error")
            else:
                outcome = self._ended(execution, started, "success", result=result)
        except ToolTimedOut:
            outcome = self._timed_out(execution, started)
        except ToolCallError as exc:
            # A transport error raised while the call was being abandoned is the abandonment's doing.
            if scope.cancel_called:
                outcome = self._stopped(execution, started, active)
            else:
                outcome = self._ended(execution, started, "failed", error=exc.message)
        except anyio.get_cancelled_exc_class():
            # The caller's own task was cancelled (a sibling step failed, the run was stopped):
            # record it, then let the cancellation go on.
            reason = f"cancelled by {active.cancelled_by}" if active.cancelled_by else "cancelled: the calling task was cancelled"
            await self._finish(self._ended(execution, started, "cancelled", reason=reason), active)
            raise
        except Exception as exc:
            await self._finish(self._ended(execution, started, "failed", error=f"internal error: {type(exc).__name__}: {exc}"),
                               active)
            raise
        return await self._finish(outcome, active)

    def _ended(self, execution: Execution, started: float, status: str, *, result: ToolResult | None = None,
               error: str | None = None, reason: str | None = None) -> Execution:
        return replace(execution, status=status, ended_at=self._now(), duration_ms=(time.perf_counter() - started) * 1000,
                       result=result, error=redact_text(error) if error else None, reason=reason)

    def _stopped(self, execution: Execution, started: float, active: _Active) -> Execution:
        """The outcome of a call our own scope abandoned: cancelled by someone, else timed out."""
        if active.cancelled_by is not None:
            return self._ended(execution, started, "cancelled", reason=f"cancelled by {active.cancelled_by}")
        return self._timed_out(execution, started)

    def _timed_out(self, execution: Execution, started: float) -> Execution:
        return self._ended(execution, started, "cancelled", reason=f"timeout after {execution.timeout_ms} ms",
                           error=f"tool '{execution.tool}' timed out after {execution.timeout_ms} ms")

    async def _finish(self, outcome: Execution, active: _Active) -> Execution:
        try:
            with anyio.CancelScope(shield=True):
                wrote = await self.db.write(self._finish_in, outcome)
                if not wrote:
                    # Closed meanwhile by someone else (an engine that took this process for dead).
                    return await self.executions.get(outcome.id) or outcome
                kind = "execution_cancelled" if outcome.status == "cancelled" else "execution_finished"
                await self._emit(kind, outcome, status=outcome.status, duration_ms=outcome.duration_ms,
                                 reason=outcome.reason or outcome.error)
            return outcome
        finally:
            self._active.pop(outcome.id, None)
            active.done.set()

    def _finish_in(self, conn: sa.Connection, outcome: Execution) -> bool:
        if not self.executions.finish_in(conn, outcome):
            return False
        self._audit_in(conn, self._outcome_entry(outcome))
        return True

    # -- status, cancellation -----------------------------------------------------------------

    async def get_execution(self, execution_id: str, principal: Principal) -> Execution:
        """One execution of `principal` (any, for an admin).

        Raises:
            NotFound: no such execution, or it belongs to someone else.
        """
        execution = await self.executions.get(execution_id)
        if execution is None or not (principal.is_admin or execution.user == principal.name):
            raise NotFound(f"execution '{execution_id}' not found")
        return execution

    async def cancel(self, execution_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> Execution:
        """Cancel a running execution of `principal` (any, for an admin), in this process or another.

        Waits up to `wait_s` for it to end and returns it (still `running`, with
        `cancel_requested_by` set, if its process has not noticed yet).

        Raises:
            NotFound: no such execution, or it belongs to someone else.
            UsageError: it is not running.
        """
        by = principal.name
        active = self._active.get(execution_id)
        if active is not None and (principal.is_admin or active.execution.user == by):
            # Running here: cancel its scope before any I/O, then wait for its final record.
            active.cancel(by)
            with anyio.move_on_after(wait_s):
                await active.done.wait()
            return await self.executions.get(execution_id) or active.execution
        execution = await self.get_execution(execution_id, principal)
        if execution.status != "running":
            raise UsageError(f"execution '{execution_id}' is not running (it ended {execution.status}); "
                             "only running executions can be cancelled")
        if not await self.executions.request_cancel(execution_id, by, self._now()):
            return await self.executions.get(execution_id) or execution
        owner = execution.owner
        if owner is not None and owner.host == self.owner.host and owner.pid != self.owner.pid and not pid_alive(owner.pid):
            # Nobody will notice the flag: its process is gone. Close it here.
            closed = replace(execution, status="cancelled", ended_at=self._now(), reason=f"cancelled by {by}",
                             duration_ms=execution.running_time_ms(self._now()))
            if await self.executions.finish(closed):
                await self._audit_outcome(closed)
            return await self.executions.get(execution_id) or closed
        with anyio.move_on_after(wait_s):
            while True:
                with anyio.CancelScope(shield=True):  # as in `_watch`: the wait ends between reads
                    current = await self.executions.get(execution_id)
                if current is None or current.status != "running":
                    return current or execution
                await anyio.sleep(self.config.cancel_poll_ms / 1000)
        return await self.executions.get(execution_id) or execution

    async def cancel_run(self, run_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> list[str]:
        """Cancel every running execution of a BUILD run (the caller's, or anyone's for an admin),
        here at once and in other processes through the store; later steps of the run end
        cancelled without running.

        Returns:
            The ids of the executions asked to cancel (empty when none was running).
        """
        user = None if principal.is_admin else principal.name
        flagged = await self.executions.request_run_cancel(run_id, principal.name, self._now(), user=user)
        local = [a for a in self._active.values()
                 if a.execution.run_id == run_id and (user is None or a.execution.user == user)]
        for active in local:
            active.cancel(principal.name)
        with anyio.move_on_after(wait_s):
            for active in local:
                await active.done.wait()
        return sorted(set(flagged) | {a.execution.id for a in local})

    # -- reading --------------------------------------------------------------------------------

    async def active(self, principal: Principal) -> list[Execution]:
        """Running executions of `principal` (everyone's, for an admin) in every process, oldest first."""
        return await self.executions.running(user=None if principal.is_admin else principal.name)

    async def history(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> HistoryPage:
        """A page of history with its statistics (`filters`, or `HistoryQuery` fields as keywords)."""
        return await self.history_store.page(principal, filters or HistoryQuery(**kwargs))

    async def stats(self, principal: Principal, filters: HistoryQuery | None = None, **kwargs: Any) -> Stats:
        """Statistics of the executions `filters` match (paging ignored)."""
        return await self.history_store.stats(principal, filters or HistoryQuery(**kwargs))

    async def metrics(self, tool: str | None = None, *, principal: Principal | None = None) -> MetricsSnapshot:
        """Every figure (about one tool); with `principal`, its own figures as `user_stats`, and
        only its own line in `users` unless it is an admin."""
        registered = {e.name: e.category for e in self.registry.entries()}
        return await self.metrics_store.snapshot(
            tool=tool, registered=registered, user=principal.name if principal else None,
            only_user=principal is not None and not principal.is_admin, now=self._now(),
        )

    async def list_tools(
        self,
        principal: Principal | None = None,
        *,
        category: str | None = None,
        search: str | None = None,
        tags: Sequence[str] | None = None,
        include_deprecated: bool = False,
        include_disabled: bool = False,
    ) -> ToolListing:
        """Discovery over the registered tools, each marked runnable or not for `principal`.

        Raises:
            UsageError: unknown category.
        """
        if category is not None:
            parse_category(category)
        return self.registry.list(category=category, search=search, tags=tags, include_deprecated=include_deprecated,
                                  include_disabled=include_disabled, level=principal.level if principal else None)

    async def tool_details(self, name: str, principal: Principal) -> ToolDetails:
        """A tool with its schema, its metrics and the caller's own figures for it.

        Raises:
            NotFound: no such tool.
        """
        entry = self.registry.require(name)
        snapshot = await self.metrics_store.snapshot(tool=name, registered={name: entry.category}, now=self._now())
        metrics = snapshot.tool_metrics(name) or ToolMetrics(name, entry.category)
        own = await self.metrics_store.user_tool_stats(principal.name, name)
        return ToolDetails(entry, metrics, own, entry.enabled and can_run(principal.level, entry.risk))

    async def limit_status(self, principal: Principal, *, tool: str | None = None) -> list[LimitStatus]:
        """Where `principal`'s rate limits and budget stand (for rate-limit headers)."""
        category = None
        if tool is not None:
            entry = self.registry.get(tool)
            category = entry.category if entry is not None else None
        return await self.limits.usage(principal.name, principal.plan, tool=tool, category=category)

    async def prune(self, older_than_days: int | None = None) -> int:
        """Delete executions that ended more than `older_than_days` (default: the config's
        `retention_days`) ago; returns how many."""
        days = self.config.retention_days if older_than_days is None else older_than_days
        if days < 0:
            raise UsageError("older-than-days must be 0 or more")
        return await self.executions.prune(self._now() - timedelta(days=days))


__all__ = ["CANCEL_WAIT_S", "DEFAULT_AUDIT", "Engine", "Invoke", "ToolDetails"]
