"""Agents admin: list, read, create or update, delete (a BUILD run of an agent is in `routes_runs`).

| route                                   | who                                                      |
| ---                                     | ---                                                      |
| `GET    /api/agents`                    | any key (secrets masked unless the caller may edit the agent) |
| `GET    /api/agents/{org}/{slug}`       | any key (secrets masked unless the caller may edit the agent) |
| `PUT    /api/agents/{org}/{slug}`       | the organization's editors; its admins to change `security` (`engine.ownership`) |
| `DELETE /api/agents/{org}/{slug}`       | the organization's editors; its admins for an agent with `security` |
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from ..agents import AgentRecord, load_definition_text, load_record
from ..agents.loaders import DEFAULT_MODE_PROFILE
from ..agents.models import AgentDef
from ..engine.agent_masking import masked_definition, masked_record_json
from ..errors import DefinitionInvalid
from . import schemas
from .auth import CallerDep
from .errors import error_body
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
from .routes_orgs import actor, organizations

router = APIRouter(prefix="/api", tags=["agents"])

_AGENT: Responses = {404: error_response("No such agent")}


def _agent_json(record: AgentRecord, *, masked: bool = False) -> dict[str, Any]:
    data = masked_record_json(record) if masked else record.model_dump(mode="json")
    try:
        defn = load_record(record).definition
        data["valid"] = True
        data["tools"] = defn.configuration.tools
    except Exception as exc:  # noqa: BLE001 - an invalid stored row is reported, not fatal to the listing
        data["valid"] = False
        data["error"] = str(exc)
    return data


@router.get(
    "/agents",
    summary="List agents",
    response_model=schemas.AgentListOutput,
    responses={**INPUT_RESPONSES, **AUTH_RESPONSES},
)
async def list_agents(
    request: Request,
    caller: CallerDep,
    org: Annotated[str | None, Query(max_length=200, description="Only this organization.")] = None,
) -> Any:
    """Every stored agent (optionally of one organization), ordered by organization and slug; each
    says whether its definition is valid."""
    records = await services(request).store.agents.list_agents(org)
    editable = await organizations(request).editable(actor(caller), {r.organization_slug for r in records})
    agents = [_agent_json(r, masked=r.organization_slug not in editable) for r in records]
    return {"success": True, "agents": agents, "totalCount": len(records)}


@router.get(
    "/agents/{org}/{slug}",
    summary="Get an agent",
    response_model=schemas.AgentOutput,
    responses={**AUTH_RESPONSES, **_AGENT, **INPUT_RESPONSES},
)
async def get_agent(request: Request, org: OrgPath, slug: SlugPath, caller: CallerDep) -> Any:
    """One agent record with its validated definition (defaults filled in). Secrets in it (values
    under keys such as `api_key`, and key-shaped strings) are masked unless the caller may edit
    the agent: a secret belongs in the environment, referenced by name."""
    record = await services(request).store.agents.get_agent(org, slug)
    definition = load_record(record).definition.model_dump(mode="json", by_alias=True)
    masked = org not in await organizations(request).editable(actor(caller), {org})
    if masked:
        definition = masked_definition(definition)
    return {"success": True, "agent": _agent_json(record, masked=masked), "definition": definition}


@router.put(
    "/agents/{org}/{slug}",
    summary="Create or update an agent",
    response_model=schemas.AgentUpsertOutput,
    # The YAML form is turned into the JSON record before the route (`api.yaml_body`).
    openapi_extra={
        "requestBody": {
            "content": {
                "application/yaml": {
                    "schema": {"type": "string", "description": "The agent definition itself (an agent YAML file)."}
                }
            }
        }
    },
    responses={
        **INPUT_RESPONSES,
        **AUTH_RESPONSES,
        403: error_response(
            "`view_only` users change no agents; others need the organization's editor role (its admin role "
            "to change `security`)"
        ),
    },
)
async def put_agent(
    request: Request, org: OrgPath, slug: SlugPath, body: schemas.AgentUpsert, caller: CallerDep
) -> Any:
    """Upsert the agent record by (organization, slug). The definition in `yaml` is validated
    first: a tool without namespace, a misspelled key or a bad template is a 400 naming each field
    (`yaml.configuration.tools[0]`, ...). `outcome` is `inserted`, `updated` or `unchanged`.

    The body is the record (a seed record as it is, or just `{"yaml": ...}`), or, sent as
    `Content-Type: application/yaml`, the agent definition itself. Columns not given default from
    its `metadata`: `display_name` from `displayName` (else `name`), `agent_type` from `type`,
    `description` and `version` likewise, `mode_profile` `tool_full`, `status` `active`.

    The caller needs the editor role in the organization, and its admin role when the change
    adds, removes or edits `configuration.security` (global admins act as admin everywhere). An
    organization that does not exist yet is created with the caller as its admin. Every change
    is an audit row with its diff (`agent.create`, `agent.update`)."""
    who = actor(caller)
    # Before the body is read further: a `view_only` key gets nothing parsed on its behalf.
    await organizations(request).check_level(who, org, slug)
    keys = (("organization_slug", body.organization_slug, org), ("slug", body.slug, slug))
    mismatched = [
        {"field": name, "message": f"is '{value}' but the path says '{expected}'"}
        for name, value, expected in keys
        if value is not None and value != expected
    ]
    if mismatched:
        message = "; ".join(f"{f['field']}: {f['message']}" for f in mismatched)
        return JSONResponse(error_body("BAD_REQUEST", message, mismatched), status_code=400)
    try:
        definition = load_definition_text(body.yaml, source=f"{org}/{slug}: yaml")
    except DefinitionInvalid as exc:
        return invalid_definition(exc, "yaml")
    record = AgentRecord(organization_slug=org, slug=slug, **_with_metadata_defaults(body, definition))
    outcome, stored = await organizations(request).put_agent(who, record)
    return {"success": True, "outcome": outcome, "agent": _agent_json(stored)}


def _with_metadata_defaults(body: schemas.AgentUpsert, definition: AgentDef) -> dict[str, Any]:
    """The record's columns: the body's, else what the definition's `metadata` says (as a bare
    YAML file is stored by `toolagent agents upsert`)."""
    md = definition.metadata
    defaults = {
        "display_name": md.displayName or md.name,
        "agent_type": md.type,
        "mode_profile": DEFAULT_MODE_PROFILE,
        "status": "active",
        "description": md.description,
        "version": md.version,
    }
    return {**{k: v for k, v in defaults.items() if v is not None}, **body.record_fields()}


@router.delete(
    "/agents/{org}/{slug}",
    summary="Delete an agent",
    response_model=schemas.AgentDeleteOutput,
    responses={
        **AUTH_RESPONSES,
        **_AGENT,
        **INPUT_RESPONSES,
        403: error_response(
            "The caller lacks the organization's editor role (admin, for an agent with a `security` block)"
        ),
    },
)
async def delete_agent(request: Request, org: OrgPath, slug: SlugPath, caller: CallerDep) -> Any:
    """Remove an agent record (its past runs and deliverables stay). Needs the organization's editor
    role, or its admin role when the agent has a `security` block; audited (`agent.delete`)."""
    await organizations(request).delete_agent(actor(caller), org, slug)
    return {"success": True, "deleted": f"{org}/{slug}"}
