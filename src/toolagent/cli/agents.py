"""`toolagent agents ...` and `toolagent seed`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.markup import escape

from ..agents import DEFAULT_ORG, LoadedAgent, definition_json_schema, load_path, load_record
from ..engine.ownership import Actor
from ..errors import DefinitionInvalid
from ._app import EXIT_FAILED, EXIT_USAGE, app, emit_json, err, fail, out, run, state
from ._tables import Column, fitted_table

agents_app = typer.Typer(help="Validate, list, show, store and export agent definitions.", no_args_is_help=True)
app.add_typer(agents_app, name="agents")


def operator() -> Actor:
    """The CLI's actor for store changes: `--user` / `TOOLAGENT_USER`, else the OS account. The CLI
    opens the store itself, so its changes are audited under that name but not gated by roles."""
    from ..engine.principals import local_user_name

    return Actor.local_operator(state.user or local_user_name())


async def resolve_agent(ref: str) -> LoadedAgent:
    """Load an agent from a file path or `org/slug` in the store."""
    # The runner and the store load here, not at import: `agents validate` needs neither.
    from ..runs import load_agent
    from ..store import open_store

    if Path(ref).is_file():
        return await load_agent(ref, None)
    async with open_store(state.db) as store:
        return await load_agent(ref, store)


def _summary(agent: LoadedAgent) -> dict[str, Any]:
    cfg = agent.definition.configuration
    return {
        "ref": agent.ref,
        "display_name": agent.record.display_name,
        "version": agent.record.version or agent.definition.metadata.version,
        "status": agent.record.status,
        "mode": cfg.toolExecutionMode.value,
        "stopOnError": cfg.stopOnError,
        "tools": list(cfg.tools),
    }


def normalized(agent: LoadedAgent) -> dict[str, Any]:
    """The definition with every default filled in, as JSON data."""
    return agent.definition.model_dump(mode="json", by_alias=True)


@agents_app.command("list")
def list_agents(org: str | None = typer.Option(None, "--org", help="Only this organization.")) -> None:
    """List agents in the store (seed the demo with `toolagent seed`)."""

    from ..store import open_store

    async def body() -> None:
        async with open_store(state.db) as store:
            records = await store.agents.list_agents(org)
        rows = []
        for rec in records:
            try:
                rows.append({**_summary(load_record(rec)), "valid": True})
            except DefinitionInvalid as exc:
                rows.append(
                    {
                        "ref": rec.ref,
                        "display_name": rec.display_name,
                        "version": rec.version,
                        "status": rec.status,
                        "valid": False,
                        "error": exc.message,
                    }
                )
        if state.json:
            emit_json(rows)
            return
        if not rows:
            err.print("no agents stored yet: run `toolagent seed` to add the demo agent")
            return
        columns = (
            Column("agent", keep=True),
            Column("name", drop=1),
            Column("version", drop=3),
            Column("status"),
            Column("mode", drop=2),
            Column("tools", keep=True),
        )
        cells = [
            (
                escape(r["ref"]),
                escape(r["display_name"]),
                escape(r["version"] or ""),
                escape(r["status"]),
                r.get("mode", ""),
                "\n".join(escape(t) for t in r["tools"])
                if r.get("valid")
                else f"[red]invalid:[/] {escape(r['error'])}",
            )
            for r in rows
        ]
        out.print(fitted_table(columns, cells, out.width))

    run(body)


@agents_app.command("show")
def show(ref: str = typer.Argument(..., help="ORG/SLUG of a stored agent, or a path to a YAML/JSON file.")) -> None:
    """Show an agent's normalized definition (defaults filled in)."""

    async def body() -> None:
        agent = await resolve_agent(ref)
        data = {"ref": agent.ref, "source": agent.source, "definition": normalized(agent)}
        if state.json:
            emit_json(data)
            return
        s = _summary(agent)
        out.print(f"[bold]{s['ref']}[/] — {s['display_name']} (version {s['version']}, {s['status']})")
        out.print(f"mode: {s['mode']}, stopOnError: {str(s['stopOnError']).lower()}")
        out.print("tools:")
        for tool in s["tools"]:
            out.print(f"  - {tool}")
        out.print(yaml.safe_dump(data["definition"], sort_keys=False, width=100), markup=False)

    run(body)


@agents_app.command("validate")
def validate(
    paths: list[Path] = typer.Argument(..., help="Agent files (YAML definitions, seed JSON records)."),
) -> None:
    """Validate agent files; report every error of every file. Exit 0 all valid, 1 any invalid."""
    results: list[dict[str, Any]] = []
    for path in paths:
        try:
            loaded = load_path(path)
            results.append({"path": str(path), "valid": True, "agents": [a.ref for a in loaded], "errors": []})
        except DefinitionInvalid as exc:
            results.append(
                {"path": str(path), "valid": False, "agents": [], "errors": [p.to_dict() for p in exc.problems]}
            )
    bad = [r for r in results if not r["valid"]]
    if state.json:
        emit_json(results)
    else:
        for r in results:
            if r["valid"]:
                out.print(f"[green]ok[/]      {r['path']} ({', '.join(r['agents'])})")
            else:
                for e in r["errors"]:
                    where = f"{r['path']}: {e['path']}" if e["path"] else r["path"]
                    err.print(f"[red]invalid[/] {where}: {e['message']}", markup=True)
    raise typer.Exit(EXIT_FAILED if bad else 0)


@agents_app.command("upsert")
def upsert(
    path: Path = typer.Argument(..., help="A YAML definition or seed JSON record(s)."),
    org: str = typer.Option(DEFAULT_ORG, "--org", help="Organization for a bare YAML definition."),
) -> None:
    """Insert or update agents from a file, by (organization, slug); each change is audited with its diff."""
    from ..store import open_store

    async def body() -> None:
        from ..engine.orgs import Organizations

        loaded = load_path(path, org=org)
        async with open_store(state.db) as store:
            orgs = Organizations(store.db)
            report = [(await orgs.put_agent(operator(), a.record))[0] for a in loaded]
        _print_upserts([(a.ref, o) for a, o in zip(loaded, report, strict=True)])

    run(body)


def _print_upserts(items: list[tuple[str, str]]) -> None:
    if state.json:
        emit_json([{"agent": ref, "outcome": outcome} for ref, outcome in items])
        return
    for ref, outcome in items:
        out.print(f"{outcome:9} {ref}")


@agents_app.command("export")
def export(ref: str = typer.Argument(..., help="ORG/SLUG of a stored agent.")) -> None:
    """Print a stored agent's definition as YAML (a file `agents upsert` accepts)."""

    async def body() -> None:
        agent = await resolve_agent(ref)
        if state.json:
            emit_json(normalized(agent))
        else:
            print(yaml.safe_dump(normalized(agent), sort_keys=False, width=100), end="")

    run(body)


@agents_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of an agent definition, for editors (yaml-language-server etc.)."""
    print(json.dumps(definition_json_schema(), indent=2))


@app.command("seed")
def seed(
    files: list[Path] = typer.Argument(None, help="Seed files (default: every seeds/*.json)."),
) -> None:
    """Upsert seed agent records by (organization, slug); running it twice changes nothing."""
    from ..seeding import default_seed_files, seed_files
    from ..store import open_store

    async def body() -> None:
        paths = files or default_seed_files()
        if not paths:
            fail("no seed files given and none found in ./seeds", EXIT_USAGE)
        async with open_store(state.db) as store:
            items = await seed_files(store, paths, operator())
        _print_upserts(items)

    run(body)


__all__ = ["agents_app", "normalized", "operator", "resolve_agent"]
