"""`toolagent users | keys`: principals and their API keys.

`users` and `keys` administer the store itself: whoever can open the store can change it, so they
are not gated by a level.
"""

from __future__ import annotations

import typer
from rich.table import Table

from ..model.permissions import LEVELS, PLANS
from ._app import app, emit_json, err, out, run, state
from ._runtime import open_engine
from ._tables import Column, fitted_table, time_cell

users_app = typer.Typer(help="Users: permission level and plan.", no_args_is_help=True)
keys_app = typer.Typer(help="API keys: create (shown once), list, revoke.", no_args_is_help=True)
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")

_LEVELS_HELP = ", ".join(LEVELS)
_PLANS_HELP = ", ".join(PLANS)


# -- users ---------------------------------------------------------------------------------------


@users_app.command("add")
def users_add(
    name: str = typer.Argument(..., help="User name."),
    level: str | None = typer.Option(
        None, "--level", "-l", help=f"Permission level: {_LEVELS_HELP}. Default: the plan's."
    ),
    plan: str = typer.Option("free", "--plan", "-p", help=f"Plan: {_PLANS_HELP}."),
) -> None:
    """Add a user."""

    async def body() -> None:
        async with open_engine() as engine:
            user = await engine.principals.add_user(name, level=level, plan=plan)
        if state.json:
            emit_json(user.to_json())
        else:
            out.print(f"added user {user.name} ({user.level}, plan {user.plan})", markup=False)

    run(body)


@users_app.command("list")
def users_list() -> None:
    """List users."""

    async def body() -> None:
        async with open_engine() as engine:
            users = await engine.principals.list_users()
        if state.json:
            emit_json([u.to_json() for u in users])
            return
        table = Table("user", "level", "plan", "created")
        for u in users:
            table.add_row(u.name, u.level, u.plan, time_cell(u.created_at))
        out.print(table)

    run(body)


@users_app.command("show")
def users_show(name: str = typer.Argument(..., help="User name.")) -> None:
    """Show a user with where its rate limits and monthly budget stand."""

    async def body() -> None:
        async with open_engine() as engine:
            user = await engine.principals.get_user(name)
            usage = await engine.limit_status(user)
        if state.json:
            emit_json({**user.to_json(), "limits": [u.to_json() for u in usage]})
            return
        out.print(f"{user.name}: {user.level}, plan {user.plan}", markup=False)
        for u in usage:
            out.print(f"  {u.scope}: {u.used}/{u.limit} used, resets in {u.reset_in_s:.0f} s", markup=False)

    run(body)


@users_app.command("set-level")
def users_set_level(
    name: str = typer.Argument(..., help="User name."),
    level: str = typer.Argument(..., help=f"New level: {_LEVELS_HELP}."),
) -> None:
    """Change a user's permission level."""

    async def body() -> None:
        async with open_engine() as engine:
            user = await engine.principals.set_level(name, level)
        if state.json:
            emit_json(user.to_json())
        else:
            out.print(f"user {user.name} is now {user.level}", markup=False)

    run(body)


@users_app.command("set-plan")
def users_set_plan(
    name: str = typer.Argument(..., help="User name."),
    plan: str = typer.Argument(..., help=f"New plan: {_PLANS_HELP}."),
) -> None:
    """Change a user's plan (its rate limit and monthly budget; the level stays)."""

    async def body() -> None:
        async with open_engine() as engine:
            user = await engine.principals.set_plan(name, plan)
        if state.json:
            emit_json(user.to_json())
        else:
            out.print(f"user {user.name} is now on plan {user.plan}", markup=False)

    run(body)


# -- keys ----------------------------------------------------------------------------------------


@keys_app.command("create")
def keys_create(
    user: str = typer.Option(..., "--user", "-u", help="The user the key acts for."),
    scope: list[str] = typer.Option(
        [],
        "--scope",
        "-s",
        help="Scope, repeatable: `*` (default), `agent:execute:*` or `agent:execute:CATEGORY`.",
    ),
    label: str | None = typer.Option(None, "--label", help="A name to recognize the key by."),
) -> None:
    """Create an API key. The key is printed once: store it now."""

    async def body() -> None:
        async with open_engine() as engine:
            key, raw = await engine.principals.create_key(user, scopes=scope, label=label)
        if state.json:
            emit_json({**key.to_json(), "key": raw})
        else:
            print(raw)
            err.print(f"key {key.id} for {key.user} (scopes {' '.join(key.scopes)}): shown only now", markup=False)

    run(body)


@keys_app.command("list")
def keys_list(user: str | None = typer.Option(None, "--user", "-u", help="Only this user's keys.")) -> None:
    """List API keys (ids and prefixes, never the keys)."""

    async def body() -> None:
        async with open_engine() as engine:
            keys = await engine.principals.list_keys(user)
        if state.json:
            emit_json([k.to_json() for k in keys])
            return
        columns = (
            Column("id", keep=True),
            Column("user", keep=True),
            Column("prefix", keep=True, drop=2),
            Column("scopes"),
            Column("created", drop=3),
            Column("revoked"),
            Column("label", drop=1),
        )
        cells = [
            (
                k.id,
                k.user,
                k.prefix + "…",
                " ".join(k.scopes),
                time_cell(k.created_at),
                time_cell(k.revoked_at),
                k.label or "",
            )
            for k in keys
        ]
        out.print(fitted_table(columns, cells, out.width, markup=False))

    run(body)


@keys_app.command("revoke")
def keys_revoke(key_id: str = typer.Argument(..., help="Key id (key_...).")) -> None:
    """Revoke an API key: it stops working at once, in every process."""

    async def body() -> None:
        async with open_engine() as engine:
            key = await engine.principals.revoke_key(key_id)
        if state.json:
            emit_json(key.to_json())
        else:
            out.print(f"revoked {key.id} ({key.user}) at {time_cell(key.revoked_at)}", markup=False)

    run(body)
