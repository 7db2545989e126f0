"""Organizations and their members (who may change which agents: `engine.ownership`).

| route                                   | who                                                  |
| ---                                     | ---                                                  |
| `GET    /api/orgs`                      | any key: global admins see every organization, others their own |
| `GET    /api/orgs/{org}/members`        | the organization's admins, global admins             |
| `PUT    /api/orgs/{org}/members/{user}` | the organization's admins, global admins             |
| `DELETE /api/orgs/{org}/members/{user}` | the organization's admins, global admins             |

Every membership change (and every refused one) is an audit row (`org.grant`, `org.revoke`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from ..engine.orgs import Organizations
from ..engine.ownership import Actor
from .auth import Caller, CallerDep
from .route_helpers import AUTH_RESPONSES, INPUT_RESPONSES, OrgPath, Responses, error_response

router = APIRouter(prefix="/api", tags=["organizations"])

_User = Annotated[str, Path(min_length=1, max_length=200, description="User name.")]
RoleName = Literal["viewer", "editor", "admin"]

_ADMIN: Responses = {
    403: error_response("The caller is not an admin of the organization (nor a global admin)"),
    404: error_response("No such organization (or user, or membership)"),
    **INPUT_RESPONSES,
}


class _Output(BaseModel):
    model_config = ConfigDict(extra="allow")


class OrgOut(_Output):
    """An organization."""

    slug: str = Field(description="The `org` of its agents' `org/slug`.")
    createdAt: str | None = Field(default=None, description="When it was created.")
    createdBy: str | None = Field(default=None, description="Who created it (null: an upgrade or the operator).")
    members: int = Field(description="Users with a role in it.")
    admins: int = Field(description="Members with the admin role (0: only global admins administer it).")
    agents: int = Field(description="Agents it holds.")
    role: RoleName | None = Field(default=None, description="The caller's role in it (`admin` for a global admin).")


class OrgListOutput(_Output):
    """GET /api/orgs."""

    success: bool
    organizations: list[OrgOut]


class MemberOut(_Output):
    """A user's role in an organization."""

    organization: str
    user: str
    role: RoleName
    grantedAt: str | None = None
    grantedBy: str | None = None


class MembersOutput(_Output):
    """GET /api/orgs/{org}/members."""

    success: bool
    organization: str
    members: list[MemberOut]


class MemberGrant(BaseModel):
    """The role to give."""

    model_config = ConfigDict(extra="forbid")

    role: RoleName = Field(description="`viewer`, `editor` (changes agents) or `admin` (also `security` and members).")


class MemberGrantOutput(_Output):
    """PUT /api/orgs/{org}/members/{user}."""

    success: bool
    outcome: Literal["granted", "changed", "unchanged"]
    member: MemberOut


class MemberRevokeOutput(_Output):
    """DELETE /api/orgs/{org}/members/{user}."""

    success: bool
    revoked: MemberOut


def organizations(request: Request) -> Organizations:
    """The checked, audited organization verbs over the server's store (made once per services, so
    an app started again gets them over its new store)."""
    svc = request.app.state.services
    cached = getattr(request.app.state, "organizations", None)
    if cached is None or cached[0] is not svc:
        cached = (svc, Organizations(svc.store.db, svc.runtime.audit))
        request.app.state.organizations = cached
    return cached[1]


def actor(caller: Caller) -> Actor:
    """The request's caller as the ownership rules see it."""
    return Actor.from_principal(caller.principal, caller.api_key)


@router.get("/orgs", summary="List organizations", response_model=OrgListOutput, responses=AUTH_RESPONSES)
async def list_orgs(request: Request, caller: CallerDep) -> Any:
    """The organizations the caller belongs to (every one, for a global admin), with the caller's
    role and each one's member, admin and agent counts."""
    rows = await organizations(request).list_orgs(actor(caller))
    return {"success": True, "organizations": [{**row.to_json(), "role": role} for row, role in rows]}


@router.get(
    "/orgs/{org}/members",
    summary="List an organization's members",
    response_model=MembersOutput,
    responses={**AUTH_RESPONSES, **_ADMIN},
)
async def list_members(request: Request, org: OrgPath, caller: CallerDep) -> Any:
    """Every member with its role, admins first (for the organization's admins and global admins)."""
    members = await organizations(request).members(actor(caller), org)
    return {"success": True, "organization": org, "members": [m.to_json() for m in members]}


@router.put(
    "/orgs/{org}/members/{user}",
    summary="Give a user a role in an organization",
    response_model=MemberGrantOutput,
    responses={**AUTH_RESPONSES, **_ADMIN},
)
async def grant(request: Request, org: OrgPath, user: _User, body: MemberGrant, caller: CallerDep) -> Any:
    """Set the user's role (`viewer`, `editor`, `admin`), replacing the one it had. `outcome` is
    `granted`, `changed` or `unchanged`. The user must exist (`toolagent users add`)."""
    outcome, member = await organizations(request).grant(actor(caller), org, user, body.role)
    return {"success": True, "outcome": outcome, "member": member.to_json()}


@router.delete(
    "/orgs/{org}/members/{user}",
    summary="Remove a user from an organization",
    response_model=MemberRevokeOutput,
    responses={**AUTH_RESPONSES, **_ADMIN},
)
async def revoke(request: Request, org: OrgPath, user: _User, caller: CallerDep) -> Any:
    """Take the user's role away. An organization left with no admin is administered by global admins."""
    member = await organizations(request).revoke(actor(caller), org, user)
    return {"success": True, "revoked": member.to_json()}
