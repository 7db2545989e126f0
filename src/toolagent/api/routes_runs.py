"""BUILD runs of an agent, their progress as server-sent events, cancelling them, and deliverables.

| route                                   | who                                                      |
| ---                                     | ---                                                      |
| `POST   /api/agents/{org}/{slug}/build` | any key that may run one of its tools; each step is gated by the engine as the caller |
| `GET    /api/runs`                      | the caller's runs; everyone's, for an admin              |
| `GET    /api/runs/{id}`                 | the run's user, admins                                   |
| `POST   /api/runs/{id}/cancel`          | the run's user, admins                                   |
| `GET    /api/runs/{id}/events`          | the run's user, admins                                   |
| `GET    /api/deliverables/{id}`         | the run's user, admins                                   |

Someone else's run or deliverable answers 404, exactly as a missing one does.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header, Path, Query, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..agents import load_record
from ..errors import DefinitionInvalid, NotFound, PermissionDenied, ToolAgentError, UsageError
from ..model.bounds import bound_each_result
from ..model.status import RunStatus
from ..runs import new_run_id, plan_build
from ..store.runs import RunRow
from ..tools.base import CallContext
from ..workers.submit import follow_run
from . import schemas
from .auth import Caller, CallerDep
from .route_helpers import (
    AUTH_RESPONSES,
    INPUT_RESPONSES,
    OrgPath,
    Responses,
    SlugPath,
    error_response,
    invalid_definition,
    services,
)
from .run_events import run_event_stream, stored_events
from .services import RUN_CANCEL_GRACE_S, RUN_CANCEL_WAIT_S, Services

router = APIRouter(prefix="/api", tags=["agents"])

#: Seconds between store reads while waiting for a run of another process to stop.
CANCEL_POLL_S = 0.1

_AGENT: Responses = {404: error_response("No such agent")}
_RUN: Responses = {404: error_response("No such run or deliverable, or another user's (admins see all)")}

_RunId = Annotated[str, Path(min_length=1, max_length=100, description="`run_...` id from a build.")]


async def _visible_run(svc: Services, run_id: str, caller: Caller) -> RunRow:
    row = await svc.store.runs.get_run(run_id)
    if not caller.is_admin and row.user_id != caller.user_id:
        raise NotFound(f"run '{run_id}' not found")
    # A scoped key sees only runs that stay within its categories (as for executions).
    tools = [st.tool for st in await svc.store.runs.get_steps(run_id)]
    if not await svc.runtime.run_in_scope(run_id, caller.principal, tools):
        raise NotFound(f"run '{run_id}' not found: it calls tools outside this API key's scopes")
    return row


async def _run_json(svc: Services, row: RunRow) -> dict[str, Any]:
    steps = await svc.store.runs.get_steps(row.id)
    # Each step's result is stored bounded; together they are bounded like a deliverable.
    return {
        **row.to_json(),
        "steps": bound_each_result([st.to_json() for st in steps], svc.runtime.bounds.max_deliverable_bytes),
    }


def _links(run_id: str) -> dict[str, str]:
    return {
        "run": f"/api/runs/{run_id}",
        "events": f"/api/runs/{run_id}/events",
        "cancel": f"/api/runs/{run_id}/cancel",
    }


def _gate_build(svc: Services, caller: Caller, tools: list[str]) -> None:
    """Refuse (403) a BUILD whose tools the caller may not run at all: their level against each tool's
    risk, the API key's scopes and revocation, the operator's switch. Tools the engine does not know
    are left to the run, which reports them per step; the engine still gates every call.

    Raises:
        PermissionDenied: no tool of the run is allowed for the caller (the first reason given).
    """
    if not tools:
        return
    reasons = []
    asking = CallContext(caller.principal, api_key=caller.api_key, agent_tools=tools)
    decide = svc.runtime.policy.decide
    for name in tools:
        entry = svc.runtime.catalogue.get(name)
        if entry is None:
            return
        decision = decide(caller.principal, entry, context=asking)
        if decision.allowed:
            return
        reasons.append(decision.reason or "denied")
    raise PermissionDenied(f"user '{caller.name}' ({caller.level}) may run none of this agent's tools: {reasons[0]}")


@router.post(
    "/agents/{org}/{slug}/build",
    summary="Run an agent's BUILD",
    response_model=schemas.BuildOutput,
    responses={
        202: {"model": schemas.BuildAcceptedOutput, "description": "`async: true`: recorded and running"},
        **INPUT_RESPONSES,
        **AUTH_RESPONSES,
        **_AGENT,
    },
)
async def build(request: Request, org: OrgPath, slug: SlugPath, body: schemas.BuildRequest, caller: CallerDep) -> Any:
    """Run the agent with a BUILD body: `payload` plus optional overrides (`tools`,
    `toolParams`, `toolExecutionMode`, `stopOnError`), `format`, `metadata`. Every step goes through
    the execution engine as the caller: permission level against the tool's risk, the agent's tool
    list, the API key's scope, rate limit and budget; a refused step is recorded `denied` with the
    reason. Waits for the run and answers 200 with it and its deliverable (`success` says whether
    the run succeeded), or with `"async": true` answers 202 with the run id as soon as the run is
    recorded (follow `/api/runs/{id}/events`)."""
    svc = services(request)
    agent = load_record(await svc.store.agents.get_agent(org, slug))
    # Before any override is parsed or rendered: a caller who may run none of the tools gets
    # nothing evaluated on their behalf.
    _gate_build(svc, caller, body.tools if body.tools is not None else agent.definition.configuration.tools)
    try:
        plan = plan_build(agent, body.overrides(), deliverable_format=body.format)
    except DefinitionInvalid as exc:
        # The merged definition is checked whole; the body's override keys are top level.
        return invalid_definition(exc, "", strip="configuration.")
    run_id = new_run_id()
    if svc.dispatch.queued:
        # To the workers (`toolagent worker`): stored `queued` with its job in one transaction.
        await svc.dispatch.submit_build(
            svc.store,
            plan,
            body.payload,
            caller.principal,
            api_key=caller.api_key,
            metadata=body.metadata,
            user=caller.user_id,
            run_id=run_id,
        )
        if body.async_:
            return JSONResponse(
                {"success": True, "runId": run_id, "status": RunStatus.QUEUED, "links": _links(run_id)}, status_code=202
            )
        row = await follow_run(svc.store, run_id)
        return {
            "success": row.status == RunStatus.SUCCESS,
            "run": await _run_json(svc, row),
            "deliverable": (await svc.store.runs.get_deliverable(run_id)).to_json(),
        }
    live = svc.runs.begin(run_id, caller.runner(svc))
    if body.async_:
        await svc.runs.start(svc.task_group, live, plan, body.payload, user=caller.user_id, metadata=body.metadata)
        try:
            row = await svc.store.runs.get_run(run_id)
        except NotFound:
            raise ToolAgentError(f"run {run_id} could not be recorded; see the server log") from None
        return JSONResponse(
            {"success": True, "runId": run_id, "status": row.status, "links": _links(run_id)}, status_code=202
        )
    outcome = await svc.runs.execute(live, plan, body.payload, user=caller.user_id, metadata=body.metadata)
    row = await svc.store.runs.get_run(run_id)
    return {
        "success": outcome.ok,
        "run": await _run_json(svc, row),
        "deliverable": (await svc.store.runs.get_deliverable(run_id)).to_json(),
    }


#: Most runs one GET /api/runs answers.
MAX_RUNS_LISTED = 500


@router.get(
    "/runs",
    summary="List runs",
    response_model=schemas.RunListOutput,
    responses={**AUTH_RESPONSES, **INPUT_RESPONSES},
)
async def list_runs(
    request: Request,
    caller: CallerDep,
    agent: Annotated[
        str | None, Query(max_length=201, pattern=r"^[^/]+/[^/]+$", description="Only runs of this `org/slug`.")
    ] = None,
    status: Annotated[RunStatus | None, Query(description="Only runs of this status.")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_RUNS_LISTED, description="How many, newest first.")] = 20,
) -> Any:
    """The caller's runs (everyone's, for an admin), newest first, without their steps
    (`GET /api/runs/{id}` has those). A scoped key sees only runs that stay within its categories."""
    svc = services(request)
    org_slug = tuple(agent.split("/", 1)) if agent else None
    rows = await svc.store.runs.list_runs(
        user_id=None if caller.is_admin else caller.user_id,
        agent=(org_slug[0], org_slug[1]) if org_slug else None,
        status=status,
        limit=limit,
    )
    if caller.principal.categories is not None:
        kept = []
        for row in rows:
            tools = [st.tool for st in await svc.store.runs.get_steps(row.id)]
            if await svc.runtime.run_in_scope(row.id, caller.principal, tools):
                kept.append(row)
        rows = kept
    return {"success": True, "runs": [row.to_json() for row in rows]}


@router.get(
    "/runs/{run_id}",
    summary="Get a run",
    response_model=schemas.RunOutput,
    responses={**AUTH_RESPONSES, **_RUN, **INPUT_RESPONSES},
)
async def get_run(request: Request, run_id: _RunId, caller: CallerDep) -> Any:
    """A run with its steps (the caller's own; any, for an admin)."""
    svc = services(request)
    return {"success": True, "run": await _run_json(svc, await _visible_run(svc, run_id, caller))}


@router.post(
    "/runs/{run_id}/cancel",
    summary="Cancel a run",
    response_model=schemas.RunCancelOutput,
    responses={**AUTH_RESPONSES, **_RUN, 400: error_response("The run is not running")},
)
async def cancel_run(request: Request, run_id: _RunId, caller: CallerDep) -> Any:
    """Cancel a running run of the caller (any, for an admin), in this process or another (a CLI
    build, another API process): its running steps end `cancelled` ("cancelled by <user>"), the
    steps not yet run are recorded `cancelled`, and so is the run. Waits up to about 5 s for it to
    stop and answers with the run (`status` still `running` if it has not stopped by then). 400
    when the run has already ended."""
    svc = services(request)
    row = await _visible_run(svc, run_id, caller)
    if row.status == RunStatus.QUEUED:
        # Submitted to the workers, not started: it ends cancelled without starting, its job with it.
        if await svc.store.queue.cancel_queued_run(run_id, caller.name):
            row = await svc.store.runs.get_run(run_id)
            return {
                "success": True,
                "runId": run_id,
                "status": row.status,
                "message": "run cancelled before it started",
                "run": await _run_json(svc, row),
            }
        row = await svc.store.runs.get_run(run_id)  # a worker claimed it meanwhile
    elif row.status == RunStatus.RUNNING and row.job_id is not None:
        await svc.store.queue.abort_job(run_id)  # on a worker: its job's task is cancelled at once
    if row.status != RunStatus.RUNNING:
        raise UsageError(f"run '{run_id}' is not running (it ended {row.status}); only running runs can be cancelled")
    # Through the engine first, as `toolagent runs cancel` does: the running calls end "cancelled by
    # <caller>" and the run is flagged, so its later steps end cancelled without running.
    await caller.cancel_run(svc, run_id)
    if svc.runs.get(run_id) is None:
        await _stop_elsewhere(svc, caller, run_id)
    elif not await svc.runs.wait(run_id, RUN_CANCEL_GRACE_S):
        # Not stopped by then (e.g. its first call had not reached the engine): stop the run itself.
        await svc.runs.cancel(run_id)
        await svc.runs.wait(run_id)
    row = await svc.store.runs.get_run(run_id)
    if row.status == RunStatus.CANCELLED:
        message = "run cancelled"
    elif row.status == RunStatus.RUNNING:
        message = "cancellation requested; the run has not stopped yet"
    else:
        message = f"the run ended {row.status} before it could be cancelled"
    return {
        "success": True,
        "runId": run_id,
        "status": row.status,
        "message": message,
        "run": await _run_json(svc, row),
    }


async def _stop_elsewhere(svc: Services, caller: Caller, run_id: str) -> None:
    """Wait (at most `RUN_CANCEL_WAIT_S`) for a run of another process to stop, asking again on every
    look: a step that starts meanwhile is flagged too."""
    with anyio.move_on_after(RUN_CANCEL_WAIT_S):
        while (await svc.store.runs.get_run(run_id)).status == RunStatus.RUNNING:
            await anyio.sleep(CANCEL_POLL_S)
            await caller.cancel_run(svc, run_id)


@router.get(
    "/runs/{run_id}/events",
    summary="Step progress as server-sent events",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
            "description": "`id: <n>` / `event: <type>` / `data: <json>` records until `run_finished`",
        },
        204: {"description": "`Last-Event-ID` is the ended run's last event: nothing follows it"},
        **AUTH_RESPONSES,
        **_RUN,
        **INPUT_RESPONSES,
    },
)
async def run_events(
    request: Request,
    run_id: _RunId,
    caller: CallerDep,
    last_event_id: Annotated[
        int | None,
        Header(
            alias="Last-Event-ID",
            ge=0,
            description="The id of the last event received: the stream resumes after it (browsers send it on reconnecting).",
        ),
    ] = None,
) -> Response:
    """`text/event-stream` of the run's `run_started`, `step_started`, `step_finished` and, last,
    `run_finished` events. Each has an `id` (1, 2, ... in the order they happened: the same ids
    however late the stream is read, and from whichever process) and a JSON `data`: `type`,
    `runId`, `step` {position, tool, status, error, durationMs}; on run_finished `status`,
    `deliverableId` and `error`. Steps that never started get a `step_finished` only. A subscriber
    that comes late, even after the run ended, first gets the events so far (from the store); with
    `Last-Event-ID` only those after it, and 204 when the run has ended and nothing follows it. A
    comment line is sent every 15 s while nothing happens."""
    svc = services(request)
    row = await _visible_run(svc, run_id, caller)
    after = last_event_id or 0
    if after and row.status not in (RunStatus.QUEUED, RunStatus.RUNNING) and not svc.events.is_live(row.id):
        # An EventSource reconnects whenever a stream ends; a 204 tells it that this one is over.
        if after >= len(stored_events(row, await svc.store.runs.get_steps(row.id))):
            return Response(status_code=204)
    return StreamingResponse(
        run_event_stream(svc, row, after),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/deliverables/{deliverable_id}",
    summary="Get a deliverable",
    response_model=schemas.DeliverableOutput,
    responses={**AUTH_RESPONSES, **_RUN, **INPUT_RESPONSES},
)
async def get_deliverable(
    request: Request,
    caller: CallerDep,
    deliverable_id: Annotated[str, Path(min_length=1, max_length=100, description="`dlv_...` id, or its run's id.")],
) -> Any:
    """A deliverable by its id or its run's id (the caller's own runs; any, for an admin)."""
    svc = services(request)
    row = await svc.store.runs.get_deliverable(deliverable_id)
    try:
        await _visible_run(svc, row.run_id, caller)
    except NotFound:
        raise NotFound(f"deliverable '{deliverable_id}' not found") from None
    return {"success": True, "deliverable": row.to_json()}
