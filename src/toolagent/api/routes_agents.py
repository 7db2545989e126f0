"""Agents admin, BUILD runs, run events and deliverables."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from ..agents import AgentRecord, load_record
from ..errors import NotFound, PermissionDenied
from ..runs import new_run_id, plan_build
from ..store.runs import RunRow
from .auth import Caller, CallerDep
from .schemas import AgentUpsert, BuildRequest
from .services import Services

router = APIRouter(prefix="/api", tags=["agents"])


def services(request: Request) -> Services:
    """The process-wide services."""
    return request.app.state.services  # type: ignore[no-any-return]


def _agent_json(record: AgentRecord) -> dict[str, Any]:
    data = record.model_dump(mode="json")
    try:
        defn = load_record(record).definition
        data["valid"] = True
        data["tools"] = defn.configuration.tools
    except Exception as exc:  # noqa: BLE001 - an invalid stored row is reported, not fatal to the listing
        data["valid"] = False
        data["error"] = str(exc)
    return data


@router.get("/agents", summary="List agents")
async def list_agents(request: Request, caller: CallerDep, org: str | None = None) -> dict[str, Any]:
    """Every stored agent (optionally of one organization)."""
    records = await services(request).store.agents.list_agents(org)
    return {"success": True, "agents": [_agent_json(r) for r in records], "totalCount": len(records)}


@router.get("/agents/{org}/{slug}", summary="Get an agent")
async def get_agent(request: Request, org: str, slug: str, caller: CallerDep) -> dict[str, Any]:
    """One agent record with its normalized definition."""
    record = await services(request).store.agents.get_agent(org, slug)
    definition = load_record(record).definition.model_dump(mode="json", by_alias=True)
    return {"success": True, "agent": _agent_json(record), "definition": definition}


@router.put("/agents/{org}/{slug}", summary="Create or update an agent")
async def put_agent(request: Request, org: str, slug: str, body: AgentUpsert, caller: CallerDep) -> dict[str, Any]:
    """Upsert by (organization, slug); the definition is validated first (400 naming each problem)."""
    record = AgentRecord(organization_slug=org, slug=slug, **body.model_dump())
    load_record(record)
    outcome, stored = await services(request).store.agents.upsert_agent(record)
    return {"success": True, "outcome": outcome, "agent": _agent_json(stored)}


@router.delete("/agents/{org}/{slug}", summary="Delete an agent (admin only)")
async def delete_agent(request: Request, org: str, slug: str, caller: CallerDep) -> dict[str, Any]:
    """Remove an agent record."""
    if not caller.is_admin:
        raise PermissionDenied(f"user '{caller.name}' ({caller.level}) may not delete agents: requires admin")
    await services(request).store.agents.delete_agent(org, slug)
    return {"success": True, "deleted": f"{org}/{slug}"}


async def _visible_run(svc: Services, run_id: str, caller: Caller) -> RunRow:
    row = await svc.store.runs.get_run(run_id)
    if not caller.is_admin and row.user_id != caller.user_id:
        raise NotFound(f"run '{run_id}' not found")
    return row


async def _run_json(svc: Services, row: RunRow) -> dict[str, Any]:
    steps = await svc.store.runs.get_steps(row.id)
    return {**row.to_json(), "steps": [s.to_json() for s in steps]}


@router.post("/agents/{org}/{slug}/build", summary="Run an agent's BUILD", status_code=200)
async def build(request: Request, org: str, slug: str, body: BuildRequest, caller: CallerDep) -> Any:
    """PRD section 11 body. Waits for the run and answers with it and its deliverable, or with
    `"async": true` answers 202 with the run id at once (follow `/api/runs/{id}/events`)."""
    svc = services(request)
    agent = load_record(await svc.store.agents.get_agent(org, slug))
    plan = plan_build(agent, body.overrides(), deliverable_format=body.format)
    run_id = new_run_id()
    svc.events.started(run_id)
    runner = caller.runner(svc)

    async def go() -> Any:
        return await runner.run(plan, body.payload, user=caller.user_id, metadata=body.metadata, run_id=run_id,
                                on_event=svc.events.publish)

    if body.async_:
        svc.task_group.start_soon(go)
        return JSONResponse({"success": True, "runId": run_id, "status": "running",
                             "links": {"run": f"/api/runs/{run_id}", "events": f"/api/runs/{run_id}/events"}},
                            status_code=202)
    outcome = await go()
    row = await svc.store.runs.get_run(run_id)
    return {"success": outcome.ok, "run": await _run_json(svc, row),
            "deliverable": (await svc.store.runs.get_deliverable(run_id)).to_json()}


@router.get("/runs/{run_id}", summary="Get a run")
async def get_run(request: Request, run_id: str, caller: CallerDep) -> dict[str, Any]:
    """A run with its steps (own runs only, admins all)."""
    svc = services(request)
    return {"success": True, "run": await _run_json(svc, await _visible_run(svc, run_id, caller))}


@router.post("/runs/{run_id}/cancel", summary="Cancel a run")
async def cancel_run(request: Request, run_id: str, caller: CallerDep) -> dict[str, Any]:
    """Cancel a running run; its running steps are cancelled and recorded."""
    svc = services(request)
    row = await _visible_run(svc, run_id, caller)
    cancelled = svc.runner.cancel(run_id) or await caller.cancel_run(svc, run_id)
    return {"success": True, "runId": run_id, "cancelled": bool(cancelled), "status": row.status,
            "message": "cancellation requested" if cancelled else f"run is not running ({row.status})"}


@router.get("/runs/{run_id}/events", summary="Step progress as server-sent events")
async def run_events(request: Request, run_id: str, caller: CallerDep) -> StreamingResponse:
    """`text/event-stream` of step_started / step_finished / run_finished until the run ends."""
    svc = services(request)
    row = await _visible_run(svc, run_id, caller)

    async def stream() -> AsyncIterator[str]:
        if not svc.events.is_live(run_id):
            yield _sse({"type": "run_finished", "runId": run_id, "status": row.status})
            return
        with svc.events.subscribe(run_id) as receive:
            async for data in receive:
                yield _sse(data)

    return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _sse(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data, default=str)}\n\n"


@router.get("/deliverables/{deliverable_id}", summary="Get a deliverable")
async def get_deliverable(request: Request, deliverable_id: str, caller: CallerDep) -> dict[str, Any]:
    """A deliverable by its id or its run's id (own runs only, admins all)."""
    svc = services(request)
    row = await svc.store.runs.get_deliverable(deliverable_id)
    await _visible_run(svc, row.run_id, caller)
    return {"success": True, "deliverable": row.to_json()}
