"""`toolagent orgs list | members | grant | revoke`: organizations and who may change their agents.

Like `users` and `keys`, these administer the store itself: whoever can open the store can change
it, so they are not gated by a role; every change is audited under `--user` / `TOOLAGENT_USER`,
else the OS account's name.
"""

from __future__ import annotations

import typer
from rich.markup import escape

from ..engine.ownership import ROLES
from ._app import app, emit_json, out, run, state
from ._tables import Column, fitted_table, time_cell
from .agents import operator

orgs_app = typer.Typer(help="Organizations: list them and their members, grant and revoke roles.", no_args_is_help=True)
app.add_typer(orgs_app, name="orgs")

_ROLES_HELP = ", ".join(ROLES)


@orgs_app.command("list")
def orgs_list() -> None:
    """List organizations with their member, admin and agent counts."""
    from ..engine.orgs import Organizations
    from ..store import open_store

    async def body() -> None:
        async with open_store(state.db) as store:
            rows = await Organizations(store.db).rows.orgs()
        if state.json:
            emit_json([r.to_json() for r in rows])
            return
        if not rows:
            out.print("no organizations yet: `toolagent seed` stores the demo agent in 'demo'", markup=False)
            return
        columns = (
            Column("organization", keep=True),
            Column("agents", justify="right"),
            Column("members", justify="right"),
            Column("admins", justify="right"),
            Column("created", drop=1),
            Column("by", drop=2),
        )
        cells = [
            (
                escape(r.slug),
                str(r.agents),
                str(r.members),
                str(r.admins) if r.admins else "0 (global admins)",
                time_cell(r.created_at),
                escape(r.created_by or ""),
            )
            for r in rows
        ]
        out.print(fitted_table(columns, cells, out.width))

    run(body)


@orgs_app.command("members")
def orgs_members(org: str = typer.Argument(..., help="Organization slug, e.g. demo.")) -> None:
    """List an organization's members and their roles (admins first)."""
    from ..engine.orgs import Organizations
    from ..store import open_store

    async def body() -> None:
        async with open_store(state.db) as store:
            members = await Organizations(store.db).members(operator(), org)
        if state.json:
            emit_json([m.to_json() for m in members])
            return
        if not members:
            out.print(
                f"'{org}' has no members: only global admins (level admin) change its agents; "
                f"grant a role with `toolagent orgs grant {org} USER --role editor`",
                markup=False,
            )
            return
        columns = (
            Column("user", keep=True),
            Column("role", keep=True),
            Column("granted", drop=1),
            Column("by", drop=2),
        )
        cells = [(escape(m.user), m.role, time_cell(m.granted_at), escape(m.granted_by or "")) for m in members]
        out.print(fitted_table(columns, cells, out.width))

    run(body)


@orgs_app.command("grant")
def orgs_grant(
    org: str = typer.Argument(..., help="Organization slug (created if it does not exist yet)."),
    user: str = typer.Argument(..., help="User name (`toolagent users add` first)."),
    role: str = typer.Option(..., "--role", "-r", help=f"Role: {_ROLES_HELP}."),
) -> None:
    """Give a user a role in an organization, replacing the one it had: `editor` changes its agents,
    `admin` also their `security` block and the members."""
    from ..engine.orgs import Organizations
    from ..store import open_store

    async def body() -> None:
        async with open_store(state.db) as store:
            outcome, member = await Organizations(store.db).grant(operator(), org, user, role)
        if state.json:
            emit_json({"outcome": outcome, **member.to_json()})
        else:
            out.print(f"{outcome}: {member.user} is {member.role} of {member.org}", markup=False)

    run(body)


@orgs_app.command("revoke")
def orgs_revoke(
    org: str = typer.Argument(..., help="Organization slug."),
    user: str = typer.Argument(..., help="User name."),
) -> None:
    """Take a user's role in an organization away."""
    from ..engine.orgs import Organizations
    from ..store import open_store

    async def body() -> None:
        async with open_store(state.db) as store:
            member = await Organizations(store.db).revoke(operator(), org, user)
        if state.json:
            emit_json({"revoked": member.to_json()})
        else:
            out.print(f"revoked: {member.user} is no longer {member.role} of {member.org}", markup=False)

    run(body)


__all__ = ["orgs_app"]
