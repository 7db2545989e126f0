"""The BUILD runner: executes a `BuildPlan` through the tool stack and persists everything.

Every step is one call through the same stack as any other (`ToolStack.call`), as the runner's
caller, with the run id, the agent's tool list and its security block in the call's context;
the step's status is read off the call's outcome.

Sequential runs render each step's params just before it runs, over `payload`, `metadata`,
`steps` and `previous`; parallel runs start every step at once under a concurrency cap. With
`stopOnError`, the first failure ends the run: later sequential steps are recorded as skipped,
running parallel siblings as cancelled. Whatever happens, including cancellation of the run
itself, the run record, every step record and the deliverable are written (in a shield).
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import anyio

from .._aio import task_group
from .._evolve import evolve
from ..errors import ArgumentsInvalid, PolicyError, ToolAgentError
from ..interpolation import template_source
from ..model.bounds import ResultBounds
from ..model.spec import ToolSpec
from ..model.status import CallStatus, StepStatus, step_status
from ..store import Store
from ..store.db import utcnow
from ..tools.base import CallContext, CallOutcome
from ..tools.stack import ToolStack
from .deliverable import render_deliverable
from .flow import FlowCap, fill_required, result_view
from .plan import BuildPlan
from .steps import EventSink, RunEvent, StepState
from .writer import StepWriter

#: How many parallel steps run at once.
DEFAULT_MAX_CONCURRENCY = 16

SUCCESS, FAILED, SKIPPED, CANCELLED, DENIED, PENDING, RUNNING = (
    StepStatus.SUCCESS,
    StepStatus.FAILED,
    StepStatus.SKIPPED,
    StepStatus.CANCELLED,
    StepStatus.DENIED,
    StepStatus.PENDING,
    StepStatus.RUNNING,
)


@dataclass
class RunOutcome:
    """The finished run as persisted."""

    run_id: str
    status: str
    plan: BuildPlan
    steps: list[StepState]
    deliverable: dict[str, Any]
    started_at: datetime
    ended_at: datetime
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The run succeeded."""
        return self.status == SUCCESS


def new_run_id() -> str:
    """`run_{epoch ms}_{random}`: sortable and unguessable."""
    return f"run_{int(time.time() * 1000)}_{secrets.token_hex(4)}"


@dataclass
class BuildRunner:
    """Runs plans through the tool stack as one caller, persisting into a store."""

    tools: ToolStack
    """The tool stack every step goes through (gate, limits, records, timeout, SQL guard, schema)."""
    store: Store
    """Where the run, its steps and its deliverable are stored."""
    context: CallContext
    """Who runs it (principal, API key); each step adds the run id, the agent's tools and security."""
    default_timeout_s: float | None = None
    """A step's timeout when its server config sets none (None: the runtime's default)."""
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    flow_cap: FlowCap = field(default_factory=FlowCap)
    bounds: ResultBounds = field(default_factory=ResultBounds)
    """Byte caps on the stored step results and the deliverable."""
    _active: dict[str, anyio.CancelScope] = field(default_factory=dict)
    _reasons: dict[str, str] = field(default_factory=dict)

    def cancel(self, run_id: str, reason: str | None = None) -> bool:
        """Cancel a run of this process; its running steps are cancelled and recorded (the run's
        error is `reason`, default "run cancelled")."""
        scope = self._active.get(run_id)
        if scope is None:
            return False
        if reason is not None:
            self._reasons.setdefault(run_id, reason)
        scope.cancel()
        return True

    async def run(
        self,
        plan: BuildPlan,
        payload: Mapping[str, Any] | None = None,
        *,
        user: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        on_event: EventSink | None = None,
        claimed: bool = False,
    ) -> RunOutcome:
        """Execute the plan; never raises for step failures (they are in the outcome).

        `user` is recorded as the run's user (default: the caller's name). `claimed`: the run
        `run_id` is already stored and running (a worker claimed a submitted run), not inserted here.

        Raises:
            StoreError: the run could not be recorded at all.
        """
        run_id = run_id or new_run_id()
        user = user if user is not None else self.context.principal.name
        started = utcnow()
        steps = [StepState(s.position, s.tool) for s in plan.steps]
        meta = {
            **dict(metadata or {}),
            "run_id": run_id,
            "user": user,
            "organization": plan.organization_slug,
            "agent": plan.agent_slug,
            "agent_version": plan.agent_version,
            "started_at": started.isoformat(),
        }
        writer = StepWriter(self.store, run_id, snapshot=_step_values, max_result_bytes=self.bounds.max_result_bytes)
        ctx = _Run(
            plan, run_id, dict(payload or {}), meta, steps, _emitter(on_event), writer, started, time.perf_counter()
        )
        if not claimed:
            await self.store.runs.create_run(
                id=run_id,
                organization_slug=plan.organization_slug,
                agent_slug=plan.agent_slug,
                agent_version=plan.agent_version,
                user_id=user,
                status=RUNNING,
                execution_mode=plan.mode.value,
                stop_on_error=plan.stop_on_error,
                payload=ctx.payload,
                overrides=plan.overrides or None,
                started_at=started,
                steps=[{"position": s.position, "tool": s.tool, "status": PENDING} for s in steps],
            )
        await ctx.emit(RunEvent("run_started", run_id))
        status, error = RUNNING, None
        scope = anyio.CancelScope()
        self._active[run_id] = scope
        try:
            async with task_group() as writer_tg:
                await writer_tg.start(ctx.writer.run)
                try:
                    with scope:
                        await (self._parallel(ctx) if plan.mode.value == "parallel" else self._sequential(ctx))
                finally:
                    with anyio.CancelScope(shield=True):
                        await self._settle(ctx)
                        await ctx.writer.close()
            if scope.cancelled_caught:
                status, error = CANCELLED, self._reasons.get(run_id) or "run cancelled"
        except BaseException as exc:
            status = CANCELLED if isinstance(exc, anyio.get_cancelled_exc_class()) else FAILED
            error = (self._reasons.get(run_id) or "run cancelled") if status == CANCELLED else f"run failed: {exc}"
            with anyio.CancelScope(shield=True):
                await self._finish(ctx, status, error)
            raise
        finally:
            self._active.pop(run_id, None)
            self._reasons.pop(run_id, None)
        if status == RUNNING:
            failed = [s for s in steps if s.status in (FAILED, DENIED)]
            # A step cancelled through the engine (`cancel_run` from another process) ends the
            # run cancelled, not successful; a failure still wins over its cancelled siblings.
            cancelled = [s for s in steps if s.status == CANCELLED]
            status = FAILED if failed else CANCELLED if cancelled else SUCCESS
            error = (
                f"{len(failed)} step(s) failed: {', '.join(s.tool for s in failed)}"
                if failed
                else f"run cancelled: {cancelled[0].error or cancelled[0].tool}"
                if cancelled
                else None
            )
        with anyio.CancelScope(shield=True):
            outcome = await self._finish(ctx, status, error)
        return outcome

    async def _finish(self, ctx: _Run, status: str, error: str | None) -> RunOutcome:
        ended = utcnow()
        # Steps that never ran: skipped after a sequential failure, cancelled when the run was
        # cancelled or a parallel sibling failed (they were already scheduled).
        unrun = CANCELLED if status == CANCELLED or ctx.plan.mode.value == "parallel" else SKIPPED
        left = []
        for s in ctx.steps:
            if s.status in (PENDING, RUNNING):
                s.status = unrun
                s.error = s.error or (
                    "run cancelled" if status == CANCELLED else "not run: stopOnError after an earlier failure"
                )
                left.append({"position": s.position, **_step_values(s)})
        duration_ms = (time.perf_counter() - ctx.t0) * 1000
        # Off the event loop: a large result is serialized and bounded here (always shielded).
        deliverable = await anyio.to_thread.run_sync(
            functools.partial(
                render_deliverable,
                ctx.plan,
                ctx.steps,
                run_id=ctx.run_id,
                status=status,
                started_at=ctx.started,
                ended_at=ended,
                duration_ms=duration_ms,
                error=error,
                max_bytes=self.bounds.max_deliverable_bytes,
            )
        )
        await self.store.runs.update_steps(ctx.run_id, left)
        await self.store.runs.finish_run(
            ctx.run_id, deliverable=deliverable, status=status, error=error, ended_at=ended, duration_ms=duration_ms
        )
        # The steps that never started end too, in position order, so a stream of events says what
        # became of every step (and reads as the store's record of the run replays).
        for s in ctx.steps:
            if s.started_at is None:
                await ctx.emit(RunEvent("step_finished", ctx.run_id, s))
        await ctx.emit(
            RunEvent("run_finished", ctx.run_id, status=status, error=error, deliverable_id=deliverable["id"])
        )
        return RunOutcome(ctx.run_id, status, ctx.plan, ctx.steps, deliverable, ctx.started, ended, error)

    async def _sequential(self, ctx: _Run) -> None:
        views: dict[str, Any] = {}
        previous: tuple[str, dict[str, Any]] | None = None
        for planned, state in zip(ctx.plan.steps, ctx.steps, strict=True):
            context = {
                "payload": ctx.payload,
                "metadata": ctx.meta,
                "steps": views,
                "previous": previous[1] if previous else {},
            }
            await self._step(ctx, planned.params, state, context, previous)
            view = result_view(state.result, state.status, self.flow_cap)
            views[state.tool] = view
            previous = (state.tool, view)
            if state.status != SUCCESS and ctx.plan.stop_on_error:
                return

    async def _parallel(self, ctx: _Run) -> None:
        limiter = anyio.CapacityLimiter(self.max_concurrency)
        context = {"payload": ctx.payload, "metadata": ctx.meta, "steps": {}, "previous": {}}
        first_failure: list[str] = []

        async def one(index: int, tg_scope: anyio.CancelScope) -> None:
            async with limiter:
                await self._step(ctx, ctx.plan.steps[index].params, ctx.steps[index], context, None)
            if ctx.steps[index].status != SUCCESS and ctx.plan.stop_on_error and not first_failure:
                first_failure.append(ctx.steps[index].tool)
                tg_scope.cancel()

        async with task_group() as tg:
            for i in range(len(ctx.steps)):
                tg.start_soon(one, i, tg.cancel_scope)
        for s in ctx.steps:
            if first_failure and s.status in (CANCELLED, PENDING):
                s.status = CANCELLED
                s.error = f"cancelled: step '{first_failure[0]}' failed and stopOnError is set"
                ctx.writer.put(s.position, s)

    async def _step(
        self,
        ctx: _Run,
        params_template: Any,
        state: StepState,
        context: dict[str, Any],
        previous: tuple[str, dict[str, Any]] | None,
    ) -> None:
        state.status = RUNNING
        state.started_at = utcnow()
        t0 = time.perf_counter()
        ctx.writer.put(state.position, state)
        await ctx.emit(RunEvent("step_started", ctx.run_id, state))
        try:
            # Bare references render at the cost of a copy, here; anything else (filters, calls,
            # loops) may take long, so it renders off the event loop and the server goes on answering.
            if params_template.plain:
                params = params_template.render(context)
            else:
                params = await anyio.to_thread.run_sync(params_template.render, context)
            state.params = params
            entry = await self.tools.resolve(state.tool)
            args, sources = fill_required(
                entry.spec, params, previous[0] if previous else None, previous[1] if previous else {}, ctx.payload
            )
            state.params, state.param_sources = args, sources
            call_ctx = evolve(
                self.context,
                run_id=ctx.run_id,
                agent_tools=ctx.plan.tools,
                security=ctx.plan.security,
                timeout_ms=self._timeout_ms(entry.spec),
                settle_later=True,
            )
            outcome = await self.tools.call(entry, args, call_ctx)
            if outcome.settle is not None:
                ctx.unsettled.append((state, outcome.settle))
            _apply(state, outcome)
            if isinstance(outcome.exception, ArgumentsInvalid):
                state.error = _arguments_error(outcome.exception, params_template)
        except anyio.get_cancelled_exc_class():
            state.status, state.error = CANCELLED, state.error or "cancelled"
            self._close(ctx, state, t0)
            with anyio.CancelScope(shield=True):
                await ctx.emit(RunEvent("step_finished", ctx.run_id, state))
            raise
        except ToolAgentError as exc:
            state.status, state.error = FAILED, exc.message
        self._close(ctx, state, t0)
        await ctx.emit(RunEvent("step_finished", ctx.run_id, state))

    @staticmethod
    async def _settle(ctx: _Run) -> None:
        """Wait until every step's execution record is stored (a step goes on as soon as its call
        ends; its record's write rides with the next commit). A step whose record could not be
        stored fails."""
        unsettled, ctx.unsettled = ctx.unsettled, []
        for state, settle in unsettled:
            try:
                await settle()
            except ToolAgentError as exc:
                state.status, state.error = FAILED, f"its execution record could not be stored: {exc.message}"
                ctx.writer.put(state.position, state)

    def _timeout_ms(self, spec: ToolSpec) -> int | None:
        if spec.timeout_s is not None or self.default_timeout_s is None:
            return None  # the server config's, else the runtime's default
        return min(300_000, max(1_000, int(self.default_timeout_s * 1000)))

    @staticmethod
    def _close(ctx: _Run, state: StepState, t0: float) -> None:
        state.ended_at = utcnow()
        state.duration_ms = (time.perf_counter() - t0) * 1000
        ctx.writer.put(state.position, state)


@dataclass
class _Run:
    """Everything one run's steps share."""

    plan: BuildPlan
    run_id: str
    payload: dict[str, Any]
    meta: dict[str, Any]
    steps: list[StepState]
    emit: Callable[[RunEvent], Awaitable[None]]
    writer: StepWriter
    started: datetime
    t0: float
    unsettled: list[tuple[StepState, Callable[[], Awaitable[Any]]]] = field(default_factory=list)
    """Steps whose execution record is still being written (`BuildRunner._settle`)."""


def _step_values(step: StepState) -> dict[str, Any]:
    return {
        "status": step.status,
        "params": step.params,
        "param_sources": step.param_sources,
        "result": step.result.to_json() if step.result else None,
        "error": step.error,
        "started_at": step.started_at,
        "ended_at": step.ended_at,
        "duration_ms": step.duration_ms,
    }


def _apply(state: StepState, outcome: CallOutcome) -> None:
    """A step's status (`model.status.CALL_STATUS_AS`) and error from its call's outcome."""
    tool = state.tool
    state.result = outcome.result
    state.status = step_status(outcome.status)
    if outcome.status is CallStatus.OK:
        return
    if outcome.status is CallStatus.DENIED:
        state.error = outcome.exception.message if outcome.exception is not None else outcome.error
    elif outcome.status is CallStatus.TIMED_OUT:
        timeout_ms = outcome.record.timeout_ms if outcome.record is not None else None
        state.error = (
            f"tool '{tool}' timed out after {timeout_ms / 1000:g} s"
            if timeout_ms
            else outcome.error or f"tool '{tool}' timed out"
        )
    elif outcome.status is CallStatus.CANCELLED:
        state.error = f"execution {outcome.execution_id} of '{tool}' was cancelled: {outcome.reason or 'cancelled'}"
    elif outcome.result is not None and outcome.result.is_error:
        state.error = f"tool '{tool}' reported an error: {outcome.result.text or 'no message'}"
    else:
        exc = outcome.exception
        # A refusal before sending (the SQL guard) speaks for itself; a broken call names its tool.
        state.error = exc.message if isinstance(exc, PolicyError) else f"tool '{tool}' failed: {outcome.error}"


def _arguments_error(exc: ArgumentsInvalid, params_template: Any) -> str:
    """A schema refusal in a BUILD step: that the tool was not called and, for a template that
    rendered a number or a boolean where the schema wants a string, the template and its fix."""
    lines = [f"{exc.message}; the tool was not called"]
    for violation in getattr(exc, "violations", []):
        source = template_source(params_template, violation.path)
        wants_text = violation.keyword == "type" and (
            violation.expected == "string" or (isinstance(violation.expected, list) and "string" in violation.expected)
        )
        if source is None or not wants_text or not isinstance(violation.value, int | float):
            continue
        kind = "boolean" if isinstance(violation.value, bool) else "number"
        field_name = ".".join(str(p) for p in violation.path)
        inner = source.strip()
        fixed = (
            "{{ " + inner[2:-2].strip() + " | string }}"
            if inner.startswith("{{") and inner.endswith("}}") and inner.count("{{") == 1
            else None
        )
        fix = (
            f"write '{fixed}' to pass it as text" if fixed else "end its expression with `| string` to pass it as text"
        )
        lines.append(
            f"`{field_name}` comes from the template '{source}', which gave the {kind} {violation.value!r}: {fix}"
        )
    return "; ".join(lines)


def _emitter(sink: EventSink | None) -> Callable[[RunEvent], Awaitable[None]]:
    async def emit(event: RunEvent) -> None:
        if sink is None:
            return
        outcome = sink(event)
        if outcome is not None:
            await outcome

    return emit
