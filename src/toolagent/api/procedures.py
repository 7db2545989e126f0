"""The tools router's procedures, shared by the REST routes and the tRPC endpoint.

Each procedure is one function `(services, caller, input, reply) -> dict`: the input is a
validated pydantic model, the dict is the response body, and `reply` collects what the transport
adds around it (HTTP status, rate-limit headers, error details). `routes_tools.py` maps them to
`/api/tools/...`, `trpc.py` to `/trpc/tools.<name>`; neither holds any logic of its own, so the
two wire formats answer the same thing.

Field names follow the API doc (`tools-router-api.md`): camelCase inputs and outputs, timeouts
in milliseconds, times as ISO 8601 strings in UTC.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import anyio
from pydantic import BaseModel, ValidationError

from ..engine import HistoryQuery, LimitStatus
from ..errors import (
    ArgumentsInvalid,
    BudgetExceeded,
    CallCancelled,
    ExecutionDenied,
    NotFound,
    RateLimited,
    StoreError,
    ToolAgentError,
    ToolFailed,
    UnknownTool,
    UsageError,
)
from ..model.bounds import bound_each_result, bound_result
from ..model.entry import ToolEntry
from ..model.execution import Execution
from ..model.spec import split_name
from ..model.status import CallStatus, ExecutionStatus, StepStatus
from ..tools.base import CallContext, CallOutcome
from ..tools.records import answered
from ..tools.under_agent import under_agent
from .auth import Caller
from .procedure_models import *  # noqa: F403 - the inputs and outputs are part of this module's names
from .procedure_models import _Input
from .services import Services

log = logging.getLogger(__name__)

# -- the reply ---------------------------------------------------------------------------------


@dataclass
class Reply:
    """What a procedure adds around its body: status (REST only), headers, error details."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    details: dict[str, Any] | None = None


def refusal_headers(exc: BaseException) -> dict[str, str]:
    """`Retry-After` and the X-RateLimit headers of a rate-limit or budget refusal."""
    if not isinstance(exc, RateLimited | BudgetExceeded):
        return {}
    retry = float(getattr(exc, "retry_after_s", 0.0) or 0.0)
    headers = {"Retry-After": str(max(1, math.ceil(retry))), "X-RateLimit-Reset": str(max(0, math.ceil(retry)))}
    if isinstance(exc, RateLimited):
        headers["X-RateLimit-Limit"] = str(exc.limit)
        headers["X-RateLimit-Remaining"] = str(exc.remaining)
    return headers


def limit_headers(statuses: Sequence[LimitStatus]) -> dict[str, str]:
    """The X-RateLimit headers of the counter closest to refusing (least remaining, then soonest reset)."""
    if not statuses:
        return {}
    tightest = min(statuses, key=lambda s: (s.remaining, s.reset_in_s))
    return {
        "X-RateLimit-Limit": str(tightest.limit),
        "X-RateLimit-Remaining": str(tightest.remaining),
        "X-RateLimit-Reset": str(max(0, math.ceil(tightest.reset_in_s))),
    }


def validation_fields(exc: ValidationError) -> list[dict[str, str]]:
    """One `{field, message}` per problem of a pydantic error."""
    return [{"field": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]


def validation_message(fields: Sequence[Mapping[str, str]]) -> str:
    """`timeout: Input should be ...; limit: ...`."""
    return "; ".join(f"{f['field'] or 'input'}: {f['message']}" for f in fields)


# -- helpers -----------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _utc(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


async def tool_entry(svc: Services, name: str) -> ToolEntry:
    """A tool by qualified name, through the catalogue (tools added since start included).

    Raises:
        NotFound: no such tool.
    """
    namespace, tool = split_name(name)
    if not tool or namespace not in svc.runtime.catalogue.server_names:
        raise NotFound(f"tool '{name}' not found: list the tools with GET /api/tools (names are `server/tool`)")
    try:
        return await svc.runtime.tools.resolve(name)
    except UnknownTool as exc:
        raise NotFound(f"tool '{name}' not found: {exc.message}") from exc


async def _limit_headers(svc: Services, caller: Caller, tool: str) -> dict[str, str]:
    try:
        return limit_headers(await svc.runtime.limit_status(caller.principal, tool=tool))
    except StoreError:
        log.warning("could not read the rate limits of %s", caller.name, exc_info=True)
        return {}


# -- procedures --------------------------------------------------------------------------------


async def list_tools(svc: Services, caller: Caller, inp: ListToolsInput, reply: Reply) -> dict[str, Any]:
    """listTools: the registered tools, filtered, each marked runnable for the caller."""
    listing = await svc.runtime.list_tools(
        caller.principal,
        category=inp.category,
        search=inp.search,
        tags=inp.tags,
        include_deprecated=inp.includeDeprecated,
    )
    return {"success": True, **listing.to_json(), "user": _user(caller)}


async def execute_tool(svc: Services, caller: Caller, inp: ExecuteToolInput, reply: Reply) -> dict[str, Any]:
    """executeTool: gate, run and record one call through the tool stack; waits for it unless `async` is set.

    Raises:
        NotFound: no such tool, or no such `agent`. ArgumentsInvalid: the arguments break its schema (400).
        PermissionDenied (403), RateLimited / BudgetExceeded (429): refused, recorded as denied.
        SqlRejected (403): under `agent`, the statement breaks its security block (nothing recorded).
        ToolFailed / CallCancelled (500): the tool reported an error, timed out or was cancelled.
    """
    entry = await tool_entry(svc, inp.name)
    context = inp.context or ExecutionContextInput()
    ctx = CallContext(
        caller.principal,
        api_key=caller.api_key,
        session_id=context.sessionId,
        metadata=context.metadata,
        timeout_ms=inp.timeout,
    )
    if inp.agent is not None:
        ctx = await under_agent(svc.store, inp.agent, ctx)
    if inp.async_:
        admitted: list[Execution] = []
        outcome = await _start_in_background(svc, entry, inp.arguments, ctx, admitted)
        if outcome is None:
            reply.headers.update(await _limit_headers(svc, caller, entry.name))
            reply.status = 202
            execution = admitted[0]
            return {
                "success": True,
                "executionId": execution.id,
                "status": execution.status,
                "toolName": entry.name,
                "timestamp": _now(),
                "links": {
                    "status": f"/api/tools/executions/{execution.id}",
                    "cancel": f"/api/tools/executions/{execution.id}/cancel",
                },
            }
    else:
        outcome = await svc.runtime.tools.call(entry, inp.arguments, ctx)
    return await _answer(svc, caller, outcome, reply)


async def _answer(svc: Services, caller: Caller, outcome: CallOutcome, reply: Reply) -> dict[str, Any]:
    """The body of a call that ended (or was refused), or the error it ended with, masked as stored."""
    outcome = answered(outcome)
    exc = outcome.exception
    if isinstance(exc, ArgumentsInvalid) or (exc is not None and outcome.record is None):
        raise exc  # refused by the checks before the gate (arguments, SQL guard): nothing recorded
    if outcome.status is CallStatus.DENIED:
        reply.headers.update(await _limit_headers(svc, caller, outcome.tool))
        if isinstance(exc, ExecutionDenied) and exc.execution_id:
            # The refusal is recorded: name the record, as a failure does.
            from ..engine.hints import denial_fix

            entry = svc.runtime.catalogue.get(outcome.tool)
            reply.details = {
                "executionId": exc.execution_id,
                "status": StepStatus.DENIED,
                "fix": denial_fix(
                    exc,
                    caller.principal.name,
                    risk_source=entry.risk_source if entry is not None else None,
                    config_file=svc.config.file_of(entry.spec.server) if entry is not None else None,
                ),
            }
        elif isinstance(exc, RateLimited | BudgetExceeded):
            # Which limit, so a client can word it as the CLI does (the headers carry the figures).
            reply.details = {
                "status": StepStatus.DENIED,
                "denial": "rate_limited" if isinstance(exc, RateLimited) else "budget",
            }
        raise exc or ToolAgentError(outcome.error)
    execution = outcome.record
    assert execution is not None
    # Counted when the call was admitted: no second read, and Remaining is this call's own.
    reply.headers.update(
        limit_headers(outcome.limits) if outcome.limits else await _limit_headers(svc, caller, outcome.tool)
    )
    if outcome.ok:
        return {
            "success": True,
            "executionId": execution.id,
            "status": execution.status,
            "result": execution.result.to_json() if execution.result is not None else None,
            "toolName": execution.tool,
            "executionTime": execution.duration_ms,
            "executionTimeMs": execution.duration_ms,
            "timestamp": (execution.ended_at or execution.started_at).isoformat(),
        }
    reply.details = {"executionId": execution.id, "status": execution.status}
    if outcome.status is CallStatus.FAILED:
        raise ToolFailed(
            execution.tool,
            execution.error or "the tool reported an error",
            result=execution.result.to_json() if execution.result is not None else None,
        )
    raise CallCancelled(
        execution.error or f"execution {execution.id} of '{execution.tool}' was {execution.reason or 'cancelled'}"
    )


async def _start_in_background(
    svc: Services, entry: ToolEntry, arguments: dict[str, Any], ctx: CallContext, admitted: list[Execution]
) -> CallOutcome | None:
    """Run the call in the server's task group; return once it is admitted (None), or with its
    outcome when it never was (refused, or its run was cancelled).

    When execution is `queue` (`serve --submit`, `TOOLAGENT_EXECUTION=queue`) on PostgreSQL, the
    call is stored `queued` with its job for the workers instead (None too, `admitted` holding the
    queued record); a refused or malformed call is still answered here.
    """
    if svc.dispatch.queued:
        queued = await svc.dispatch.submit_call(svc.runtime, entry, arguments, ctx)
        if isinstance(queued, CallOutcome):
            return queued
        admitted.append(queued)
        return None
    ready = anyio.Event()
    ended: list[CallOutcome] = []
    failed: list[BaseException] = []

    def on_admitted(execution: Execution) -> None:
        admitted.append(execution)
        ready.set()

    async def background() -> None:
        try:
            ended.append(await svc.runtime.tools.call(entry, arguments, replace(ctx, on_admitted=on_admitted)))
        except Exception as exc:  # noqa: BLE001 - errors before admission go back to the request; the rest is logged
            failed.append(exc)
            if admitted:
                log.exception("background execution %s failed", admitted[0].id)
        finally:
            ready.set()

    svc.task_group.start_soon(background)
    await ready.wait()
    if admitted:
        return None
    if failed:
        raise failed[0]
    return ended[0]


async def get_tool_status(svc: Services, caller: Caller, inp: ExecutionIdInput, reply: Reply) -> dict[str, Any]:
    """getToolStatus: one execution of the caller (anyone's, for an admin)."""
    execution = await svc.runtime.get_execution(inp.executionId, caller.principal)
    # Stored under this cap already, unless written before it or by a process with a larger one.
    bounded = bound_result(execution.result, svc.runtime.bounds.max_result_bytes)
    if bounded is not execution.result:
        execution = replace(execution, result=bounded)
    return {"success": True, "execution": execution.to_json()}


async def cancel_tool_execution(svc: Services, caller: Caller, inp: ExecutionIdInput, reply: Reply) -> dict[str, Any]:
    """cancelToolExecution: cancel a running execution of the caller (anyone's, for an admin).

    Raises:
        NotFound: no such execution, or someone else's. UsageError: it is not running.
    """
    execution = await svc.runtime.cancel(inp.executionId, caller.principal)
    if execution.status == ExecutionStatus.CANCELLED:
        message = "Tool execution cancelled"
    elif execution.status == ExecutionStatus.RUNNING:
        message = "cancellation requested; the execution has not stopped yet"
    else:
        message = f"the execution ended {execution.status} before the cancellation reached it"
    return {
        "success": execution.status in (ExecutionStatus.CANCELLED, ExecutionStatus.RUNNING),
        "executionId": execution.id,
        "status": execution.status,
        "message": message,
        "timestamp": _now(),
        "execution": execution.to_json(),
    }


async def get_active_executions(svc: Services, caller: Caller, inp: NoInput, reply: Reply) -> dict[str, Any]:
    """getActiveExecutions: the caller's running executions (everyone's, for an admin)."""
    now = datetime.now(UTC)
    executions = [e.to_json(now=now) for e in await svc.runtime.active(caller.principal)]
    return {"success": True, "executions": executions, "count": len(executions)}


async def get_tool_history(svc: Services, caller: Caller, inp: HistoryInput, reply: Reply) -> dict[str, Any]:
    """getToolHistory: a page of the caller's executions, newest first, with statistics."""
    since, until = _utc(inp.startDate), _utc(inp.endDate)
    if since is not None and until is not None and until <= since:
        raise UsageError(f"endDate ({until.isoformat()}) must be after startDate ({since.isoformat()})")
    query = HistoryQuery(
        tool=inp.toolName,
        category=inp.category,
        status=inp.status,
        since=since,
        until=until,
        limit=inp.limit,
        offset=inp.offset,
        all_users=inp.allUsers,
        user=inp.userId,
    )
    page = (await svc.runtime.history(caller.principal, query)).to_json()
    # A page holds up to MAX_LIMIT results of up to the result cap each: together they are
    # bounded like a deliverable, each keeping a fair share.
    page["executions"] = bound_each_result(page["executions"], svc.runtime.bounds.max_deliverable_bytes)
    return {"success": True, **page}


async def get_tool_metrics(svc: Services, caller: Caller, inp: MetricsInput, reply: Reply) -> dict[str, Any]:
    """getToolMetrics: registry and usage figures (one tool's as `registryMetrics` with `toolName`)."""
    snapshot = await svc.runtime.metrics(inp.toolName, principal=caller.principal)
    return {"success": True, **snapshot.to_json()}


async def get_tool_details(svc: Services, caller: Caller, inp: ToolNameInput, reply: Reply) -> dict[str, Any]:
    """getToolDetails: one tool with its schema, its metrics and the caller's own figures."""
    details = await svc.runtime.tool_details(inp.name, caller.principal)
    return {"success": True, **details.to_json(), "user": _user(caller)}


def _user(caller: Caller) -> dict[str, str]:
    """Whom an answer is for (the CLI's `--api` mode prints it as the local commands do)."""
    return {"name": caller.name, "level": caller.level}


# -- the table both transports read -------------------------------------------------------------

Run = Callable[[Services, Caller, Any, Reply], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Procedure:
    """One procedure of the tools router."""

    name: str
    """tRPC name under `tools.`."""
    kind: Literal["query", "mutation"]
    """Queries are GET, mutations POST."""
    input: type[_Input]
    """Validates the input."""
    output: type[BaseModel]
    """Documents the output."""
    run: Run
    """The implementation."""

    def parse(self, raw: Any) -> _Input:
        """Validate a raw JSON input (None: no input).

        Raises:
            ValidationError: the input is invalid.
        """
        return self.input.model_validate({} if raw is None else raw)


PROCEDURES: dict[str, Procedure] = {
    p.name: p
    for p in (
        Procedure("listTools", "query", ListToolsInput, ListToolsOutput, list_tools),
        Procedure("executeTool", "mutation", ExecuteToolInput, ExecuteToolOutput, execute_tool),
        Procedure("getToolStatus", "query", ExecutionIdInput, ToolStatusOutput, get_tool_status),
        Procedure("cancelToolExecution", "mutation", ExecutionIdInput, CancelOutput, cancel_tool_execution),
        Procedure("getToolHistory", "query", HistoryInput, HistoryOutput, get_tool_history),
        Procedure("getToolMetrics", "query", MetricsInput, MetricsOutput, get_tool_metrics),
        Procedure("getActiveExecutions", "query", NoInput, ActiveOutput, get_active_executions),
        Procedure("getToolDetails", "query", ToolNameInput, ToolDetailsOutput, get_tool_details),
    )
}
"""tRPC name -> procedure: the tools router's procedures."""


__all__ = [
    "PROCEDURES",
    "ActiveOutput",
    "CancelOutput",
    "ErrorOutput",
    "ExecuteAcceptedOutput",
    "ExecuteToolInput",
    "ExecuteToolOutput",
    "ExecutionIdInput",
    "HistoryInput",
    "HistoryOutput",
    "ListToolsInput",
    "ListToolsOutput",
    "MetricsInput",
    "MetricsOutput",
    "NoInput",
    "Procedure",
    "Reply",
    "ToolDetailsOutput",
    "ToolNameInput",
    "ToolStatusOutput",
    "limit_headers",
    "refusal_headers",
    "tool_entry",
    "validation_fields",
    "validation_message",
]
