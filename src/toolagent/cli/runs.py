"""`toolagent build`, `demo`, `runs`, `deliverables` and `tools`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from ..errors import UsageError
from ..mcp.config import ServersConfig
from ..mcp.pool import ServerPool, check_arguments
from ..runs import BuildRunner, RunEvent, load_agent, plan_build
from ..runs.flow import FlowCap
from ..seeding import default_seed_files, seed_files
from ..store import open_store
from ._app import EXIT_FAILED, app, emit_json, err, is_tty, out, read_json_arg, run, state

runs_app = typer.Typer(help="Inspect BUILD runs.", no_args_is_help=True)
deliverables_app = typer.Typer(help="Inspect deliverables.", no_args_is_help=True)
tools_app = typer.Typer(help="List and call the tools of the configured MCP servers.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(deliverables_app, name="deliverables")
app.add_typer(tools_app, name="tools")

#: What the terminal shows of a value (the store keeps everything).
TERMINAL_CAP = FlowCap(max_items=20, max_chars=4000)
_MARKS = {"success": "[green]✓[/]", "failed": "[red]✗[/]", "denied": "[red]⊘[/]", "skipped": "[yellow]-[/]",
          "cancelled": "[yellow]⊗[/]"}


def _progress(event: RunEvent) -> None:
    """Live step progress on stderr (a terminal only), so stdout stays the deliverable."""
    step = event.step
    if event.kind == "step_started" and step is not None:
        err.print(f"[dim]…[/] {step.tool}", markup=True)
    elif event.kind == "step_finished" and step is not None:
        mark = _MARKS.get(step.status, "?")
        took = f"{step.duration_ms:.0f} ms" if step.duration_ms is not None else ""
        why = f" — {step.error}" if step.error else ""
        err.print(f"{mark} {step.tool} [dim]{took}[/]{why}", markup=True)


async def _build(agent_ref: str, payload: Any, overrides: Any, fmt: str | None, *, seed_first: bool = False) -> int:
    if payload is not None and not isinstance(payload, dict):
        raise UsageError("--payload must be a JSON object")
    if overrides is not None and not isinstance(overrides, dict):
        raise UsageError("--override must be a JSON object with tools, toolParams, toolExecutionMode or stopOnError")
    config = ServersConfig.load(state.servers)
    async with open_store(state.db) as store:
        if seed_first:
            for ref, outcome in await seed_files(store, default_seed_files()):
                err.print(f"[dim]seed: {outcome} {ref}[/]", markup=True)
        agent = await load_agent(agent_ref, store)
        plan = plan_build(agent, overrides, deliverable_format=fmt)
        async with ServerPool(config) as pool:
            runner = BuildRunner(pool, store, flow_cap=FlowCap.from_env())
            outcome = await runner.run(plan, payload, user=state.user, on_event=_progress if is_tty() or not state.json else None)
    d = outcome.deliverable
    if state.json:
        emit_json({"runId": outcome.run_id, "status": outcome.status, "deliverableId": d["id"], "deliverable": {
            "id": d["id"], "format": d["format"], "type": d["type"], "metadata": d["metadata"], "data": d["data"]}})
    else:
        print(d["content"], end="" if d["content"].endswith("\n") else "\n")
        colour = "green" if outcome.ok else "red"
        err.print(f"[{colour}]run {outcome.run_id}: {outcome.status}[/] — deliverable {d['id']}"
                  + (f" — {outcome.error}" if outcome.error else ""), markup=True)
    return 0 if outcome.ok else EXIT_FAILED


@app.command("build")
def build(
    agent: str = typer.Argument(..., help="ORG/SLUG of a stored agent, or a path to an agent YAML/JSON file."),
    payload: str | None = typer.Option(None, "--payload", "-p", help="Payload JSON, or @file.json."),
    override: str | None = typer.Option(
        None, "--override", "-o",
        help="Overrides JSON or @file.json: tools, toolParams, toolExecutionMode, stopOnError (PRD section 11).",
    ),
    fmt: str | None = typer.Option(None, "--format", "-f", help="Deliverable format: json, markdown or text."),
) -> None:
    """Run an agent's BUILD: call its tools over MCP and store a deliverable.

    Prints the deliverable on stdout and step progress on stderr. Exit 0 when the run
    succeeded, 1 when it failed, 2 on usage or configuration errors.

    Example: toolagent build demo/supabase-agent -o @seeds/payloads/demo_build.json -f markdown
    """
    body_payload = read_json_arg(payload, "--payload")
    body_override = read_json_arg(override, "--override")
    code = run(lambda: _build(agent, body_payload, body_override, fmt))
    raise typer.Exit(code)


@app.command("demo")
def demo(
    question: str = typer.Option("top 10 conversations by date", "--question", "-q", help="The analytics question."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="Deliverable format: json, markdown or text."),
) -> None:
    """Seed demo/supabase-agent and run its BUILD on the embedded demo database (no network needed)."""
    example = Path(__file__).resolve().parents[3] / "seeds" / "payloads" / "demo_build.json"
    overrides = json.loads(example.read_text()) if example.is_file() else {}
    overrides.setdefault("toolParams", {}).setdefault("supabase/generate-sql", {})["query"] = question
    code = run(lambda: _build("demo/supabase-agent", {}, overrides, fmt, seed_first=True))
    raise typer.Exit(code)


@runs_app.command("list")
def runs_list(
    agent: str | None = typer.Option(None, "--agent", help="Only runs of ORG/SLUG."),
    status: str | None = typer.Option(None, "--status", help="success, failed, cancelled or running."),
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="How many (newest first)."),
) -> None:
    """List recent runs."""

    async def body() -> None:
        parts = tuple(agent.split("/", 1)) if agent else None
        async with open_store(state.db) as store:
            rows = await store.runs.list_runs(agent=parts, status=status, limit=limit)  # type: ignore[arg-type]
        if state.json:
            emit_json([r.to_json() for r in rows])
            return
        table = Table("run", "agent", "status", "mode", "started", "ms", "deliverable")
        for r in rows:
            table.add_row(r.id, f"{r.organization_slug}/{r.agent_slug}", r.status, r.execution_mode,
                          r.started_at.isoformat(timespec="seconds"), f"{r.duration_ms or 0:.0f}", r.deliverable_id or "")
        out.print(table)

    run(body)


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="Run id (run_...).")) -> None:
    """Show a run and its steps."""

    async def body() -> None:
        async with open_store(state.db) as store:
            row = await store.runs.get_run(run_id)
            steps = await store.runs.get_steps(run_id)
        if state.json:
            emit_json({**row.to_json(), "steps": [s.to_json() for s in steps]})
            return
        out.print(f"[bold]{row.id}[/] {row.organization_slug}/{row.agent_slug}: {row.status} "
                  f"({row.execution_mode}, {row.duration_ms or 0:.0f} ms) deliverable {row.deliverable_id}")
        if row.error:
            out.print(f"[red]{row.error}[/]")
        for s in steps:
            mark = _MARKS.get(s.status, "?")
            out.print(f"{mark} {s.position}. {s.tool} {s.status} {s.duration_ms or 0:.0f} ms" + (f" — {s.error}" if s.error else ""))
            if s.param_sources:
                chained = {k: v for k, v in s.param_sources.items() if v != "params"}
                if chained:
                    out.print(f"   [dim]arguments from: {json.dumps(chained)}[/]")

    run(body)


@deliverables_app.command("show")
def deliverables_show(deliverable_id: str = typer.Argument(..., help="Deliverable id (dlv_...) or its run id.")) -> None:
    """Print a stored deliverable's content (with --json: everything)."""

    async def body() -> None:
        async with open_store(state.db) as store:
            row = await store.runs.get_deliverable(deliverable_id)
        if state.json:
            emit_json(row.to_json())
        else:
            print(row.content, end="" if row.content.endswith("\n") else "\n")

    run(body)


@tools_app.command("list")
def tools_list(server: str | None = typer.Option(None, "--server", help="Only this server's tools.")) -> None:
    """List the tools of every configured server (or one), as `namespace/tool`."""

    async def body() -> None:
        config = ServersConfig.load(state.servers)
        async with ServerPool(config) as pool:
            if server:
                specs, errors = await pool.list_tools(server), {}
            else:
                specs, errors = await pool.all_tools()
        if state.json:
            emit_json({"tools": [{"name": s.name, "description": s.description, "inputSchema": s.input_schema,
                                  "readOnly": s.annotations.get("read_only_hint"), "risk": s.risk,
                                  "category": s.category} for s in specs], "errors": errors})
        else:
            table = Table("tool", "description")
            for s in specs:
                table.add_row(s.name, (s.description or "").splitlines()[0][:100] if s.description else "")
            out.print(table)
            for name, why in errors.items():
                err.print(f"[red]unavailable[/] {name}: {why}", markup=True)
        if errors and not specs:
            raise typer.Exit(EXIT_FAILED)

    run(body)


@tools_app.command("call")
def tools_call(
    name: str = typer.Argument(..., help="Tool as namespace/tool, e.g. supabase/get-schema."),
    args: str = typer.Option("{}", "--args", "-a", help="Arguments JSON or @file.json."),
    timeout_ms: int | None = typer.Option(None, "--timeout", help="Timeout in ms (1000-300000)."),
) -> None:
    """Call one tool and print its result. Exit 0 ok, 1 tool error or failure, 2 bad input."""
    arguments = read_json_arg(args, "--args")

    async def body() -> int:
        from ..agents.validation import msg_no_namespace

        if not isinstance(arguments, dict):
            raise UsageError("--args must be a JSON object")
        ns, sep, tool = name.partition("/")
        if not sep or not ns or not tool:
            raise UsageError(msg_no_namespace(name))
        if timeout_ms is not None and not 1000 <= timeout_ms <= 300000:
            raise UsageError(f"--timeout must be between 1000 and 300000 ms, got {timeout_ms}")
        config = ServersConfig.load(state.servers)
        async with ServerPool(config) as pool:
            spec = await pool.tool_spec(name)
            check_arguments(spec, arguments)
            result = await pool.call(spec, arguments, timeout_s=(timeout_ms / 1000) if timeout_ms else spec.timeout_s or 30.0)
        if state.json:
            emit_json(result.to_json())
        elif result.structured is not None:
            print(json.dumps(TERMINAL_CAP.apply(result.structured), indent=2, default=str))
        else:
            print(result.text)
        return EXIT_FAILED if result.is_error else 0

    raise typer.Exit(run(body))
