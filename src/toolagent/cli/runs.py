"""`toolagent build`, `demo`, `runs` and `deliverables`.

Every BUILD step goes through the runtime's tool stack as the CLI's principal (`--user` /
`TOOLAGENT_USER`, else the local user): gated by level against risk, rate limited, recorded in
`toolagent history` and cancellable from another process with `toolagent runs cancel RUN_ID`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import typer

from ..data import demo_payload_file, servers_file
from ..engine import EngineConfig
from ..errors import DefinitionInvalid, NotFound, UsageError
from ..mcp.config import ServersConfig
from ..model.status import RunStatus
from ..runtime import Runtime
from ..store import open_store
from ..tools.base import CallContext
from ._app import EXIT_FAILED, app, emit_json, err, is_tty, out, read_json_arg, run, state
from ._hints import check_payload
from ._shown import MARKS, build_done, build_json, run_list, run_shown
from .tools import cli_runtime, namespaces_of
from .worker import dispatcher, submit_build

if TYPE_CHECKING:
    from ..runs import RunEvent

runs_app = typer.Typer(help="Inspect and cancel BUILD runs.", no_args_is_help=True)
deliverables_app = typer.Typer(help="Inspect deliverables.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(deliverables_app, name="deliverables")

#: How often `runs cancel` looks at the run while it waits for it to stop.
CANCEL_POLL_S = 0.15


def _progress(event: RunEvent) -> None:
    """Live step progress on stderr (a terminal only), so stdout stays the deliverable."""
    step = event.step
    if event.kind == "run_started":
        err.print(
            f"[dim]run {event.run_id} started; stop it with: toolagent runs cancel {event.run_id}[/]", markup=True
        )
    elif event.kind == "step_started" and step is not None:
        err.print(f"[dim]…[/] {step.tool}", markup=True)
    elif event.kind == "step_finished" and step is not None:
        mark = MARKS.get(step.status, "?")
        took = f"{step.duration_ms:.0f} ms" if step.duration_ms is not None else ""
        why = f" — {step.error}" if step.error else ""
        err.print(f"{mark} {step.tool} [dim]{took}[/]{why}", markup=True)


async def _build(
    agent_ref: str,
    payload: Any,
    overrides: Any,
    fmt: str | None,
    *,
    seed_first: bool = False,
    submit: bool = False,
    wait: bool = False,
    servers: str | None = None,
) -> int:
    if payload is not None and not isinstance(payload, dict):
        raise UsageError("--payload must be a JSON object")
    if overrides is not None and not isinstance(overrides, dict):
        raise UsageError("--override must be a JSON object with tools, toolParams, toolExecutionMode or stopOnError")
    # Here, not with the module: `runs list`, `runs show` and `deliverables` need no agent loader.
    from ..runs import load_agent, plan_build

    config = ServersConfig.load(servers or state.servers)
    async with open_store(state.db) as store:
        if seed_first:
            from ..seeding import default_seed_files, seed_files
            from .agents import operator

            for ref, seeded in await seed_files(store, default_seed_files(), operator()):
                err.print(f"[dim]seed: {seeded} {ref}[/]", markup=True)
        try:
            agent = await load_agent(agent_ref, store)
        except DefinitionInvalid as exc:
            raise await _with_namespace_suggestions(exc, config) from exc
        plan = plan_build(agent, overrides, deliverable_format=fmt)
        check_payload(plan.agent_ref, plan.steps, payload)
        dispatch = dispatcher(submit, store)
        if dispatch.queued:
            # To the workers instead (PostgreSQL): see `cli/worker.py`.
            return await submit_build(
                store, dispatch, plan, payload, wait=wait, progress=_progress if is_tty() or not state.json else None
            )
        async with cli_runtime(config, store=store) as (runtime, principal):
            # Only the servers the plan uses are started (concurrently), not every configured one.
            await runtime.catalogue.refresh(namespaces_of(plan.tools))
            # A step's timeout: its server's timeout_s in mcp.json, else the engine config's default.
            runner = runtime.runner(CallContext(principal))
            outcome = await runner.run(plan, payload, on_event=_progress if is_tty() or not state.json else None)
    d = outcome.deliverable
    from_file = agent.source != agent.ref
    shown_run = {"id": outcome.run_id, "status": outcome.status, "error": outcome.error}
    if state.json:
        emit_json(build_json(shown_run, d))
    else:
        build_done(shown_run, d, ok=outcome.ok)
        if from_file:
            # The run and deliverable carry the file's org/slug; without this line that reads as
            # if the agent were in the store, and `agents show` of it then fails.
            err.print(
                f"[dim]agent {plan.agent_ref} was read from {agent_ref} and is not stored; "
                f"`toolagent agents upsert {agent_ref}` stores it[/]",
                markup=True,
            )
    return 0 if outcome.ok else EXIT_FAILED


@app.command("build")
def build(
    agent: str = typer.Argument(..., help="ORG/SLUG of a stored agent, or a path to an agent YAML/JSON file."),
    payload: str | None = typer.Option(None, "--payload", "-p", help="Payload JSON, or @file.json."),
    override: str | None = typer.Option(
        None,
        "--override",
        "-o",
        help="Overrides JSON or @file.json: tools, toolParams, toolExecutionMode, stopOnError.",
    ),
    fmt: str | None = typer.Option(None, "--format", "-f", help="Deliverable format: json, markdown or text."),
    submit: bool = typer.Option(
        False,
        "--submit",
        help="Queue the run for `toolagent worker` (PostgreSQL) instead "
        "of running it here (also: TOOLAGENT_EXECUTION=queue); prints the run id.",
    ),
    wait: bool = typer.Option(False, "--wait", help="With --submit: follow the run to its end, as a local build."),
) -> None:
    """Run an agent's BUILD: call its tools over MCP and store a deliverable.

    Every step goes through the execution engine as --user (else the local user): a step whose
    tool is riskier than your level allows is recorded as denied, naming level, risk and tool,
    and the run fails. Steps are recorded in `toolagent history`; the run id is printed on
    stderr as it starts, so `toolagent runs cancel RUN_ID` stops it from another terminal.

    Prints the deliverable on stdout and step progress on stderr. Exit 0 when the run
    succeeded, 1 when it failed (a step failed or was denied) or was cancelled, 2 on usage or
    configuration errors.

    Example: toolagent build demo/supabase-agent -o @seeds/payloads/demo_build.json -f markdown
    """
    body_payload = read_json_arg(payload, "--payload")
    body_override = read_json_arg(override, "--override")
    code = run(lambda: _build(agent, body_payload, body_override, fmt, submit=submit, wait=wait))
    raise typer.Exit(code)


async def _with_namespace_suggestions(exc: DefinitionInvalid, servers: ServersConfig) -> DefinitionInvalid:
    """`exc` with, for each tool named without its namespace, the configured names it may mean."""
    import re

    from ..errors import Problem
    from .tools import qualified_matches

    bare = re.compile(r"^Tool '([^'/]+)' must include namespace")
    names = [m.group(1) for p in exc.problems if (m := bare.match(p.message))]
    if not names:
        return exc
    meant = await qualified_matches(names, servers)
    problems = []
    for p in exc.problems:
        m = bare.match(p.message)
        found = meant.get(m.group(1)) if m else None
        suffix = f"; did you mean {' or '.join(repr(q) for q in found)}?" if found else ""
        problems.append(Problem(p.path, p.message + suffix))
    return DefinitionInvalid(problems, source=exc.source)


@app.command("demo")
def demo(
    question: str = typer.Option("top 10 conversations by date", "--question", "-q", help="The analytics question."),
    fmt: str = typer.Option("markdown", "--format", "-f", help="Deliverable format: json, markdown or text."),
) -> None:
    """Seed demo/supabase-agent and run its BUILD on the embedded demo database (no network needed).

    Runs like `toolagent build` (through the execution engine, as --user or the local user), with
    the server config shipped with toolagent whatever --servers or ./mcp.json say; its Supabase
    tools are marked safe there, so the default execute_basic level may run them.

    Example: toolagent demo --question "how many conversations per status" --format text
    """
    example = demo_payload_file()
    overrides = json.loads(example.read_text()) if example.is_file() else {}
    overrides.setdefault("toolParams", {}).setdefault("supabase/generate-sql", {})["query"] = question
    # The demo's server is the one shipped with toolagent, whatever --servers or a ./mcp.json of
    # one's own configures: writing a config for one's own server must not break the demo.
    shipped = str(servers_file())
    code = run(lambda: _build("demo/supabase-agent", {}, overrides, fmt, seed_first=True, servers=shipped))
    raise typer.Exit(code)


@runs_app.command("list")
def runs_list(
    agent: str | None = typer.Option(None, "--agent", help="Only runs of ORG/SLUG."),
    status: str | None = typer.Option(None, "--status", help="success, failed, cancelled or running."),
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="How many (newest first)."),
) -> None:
    """List recent runs, newest first.

    Example: toolagent runs list --status failed --limit 5
    """

    async def body() -> None:
        parts = tuple(agent.split("/", 1)) if agent else None
        if parts is not None and (len(parts) != 2 or not all(parts)):
            raise UsageError(f"--agent {agent!r} is not ORG/SLUG: use e.g. --agent demo/supabase-agent")
        async with open_store(state.db) as store:
            rows = await store.runs.list_runs(agent=parts, status=status, limit=limit)
        if state.json:
            emit_json([r.to_json() for r in rows])
        else:
            run_list([r.to_json() for r in rows])

    run(body)


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="Run id (run_...).")) -> None:
    """Show a run and its steps (status, duration, error, where chained arguments came from).

    Example: toolagent runs show run_1767225600000_1a2b3c4d
    """

    async def body() -> None:
        async with open_store(state.db) as store:
            row = await store.runs.get_run(run_id)
            steps = await store.runs.get_steps(run_id)
        shown = {**row.to_json(), "steps": [s.to_json() for s in steps]}
        if state.json:
            emit_json(shown)
        else:
            run_shown(shown)

    run(body)


@runs_app.command("cancel")
def runs_cancel(
    run_id: str = typer.Argument(..., help="Run id (run_...), printed on stderr when the run starts."),
    wait_s: float = typer.Option(5.0, "--wait", min=0, help="Seconds to wait for the run to stop."),
) -> None:
    """Cancel a running BUILD run, from any process: its running step is cancelled, later steps do not run.

    Only the user who started the run (--user / TOOLAGENT_USER, else the local user) or an admin
    may cancel it; anyone else is told it does not exist. Exit 0 when the run stopped, 1 when it
    is not found or still running after --wait seconds, 2 when it is not running.

    Example: toolagent runs cancel run_1767225600000_1a2b3c4d --wait 10
    """

    async def body() -> int:
        from ..settings import Settings

        settings = Settings.from_env()  # this command's, read once
        async with (
            open_store(state.db) as store,
            Runtime(store, config=EngineConfig.load(), settings=settings) as engine,
        ):
            me = await engine.principal(state.user)
            # Someone else's run reads exactly like a missing one.
            missing = NotFound(
                f"run '{run_id}' not found among your runs: `toolagent runs list` shows run ids "
                "(only the user who started a run, or an admin, may cancel it)"
            )
            try:
                row = await store.runs.get_run(run_id)
            except NotFound:
                raise missing from None
            if not me.is_admin and row.user_id != me.name:
                raise missing
            if row.status == RunStatus.QUEUED:
                # Submitted, not started: it ends cancelled without starting, its job with it.
                if not await store.queue.cancel_queued_run(run_id, me.name):
                    row = await store.runs.get_run(run_id)  # a worker claimed it meanwhile
            elif row.status == RunStatus.RUNNING and row.job_id is not None:
                # On a worker: its job's task is cancelled at once (procrastinate abort); the
                # flags below reach its running step too.
                await store.queue.abort_job(run_id)
            if row.status not in (RunStatus.QUEUED, RunStatus.RUNNING):
                raise UsageError(
                    f"run '{run_id}' is not running (it ended {row.status}); only running runs can be cancelled"
                )
            asked: set[str] = set()
            with anyio.move_on_after(wait_s):
                while True:
                    # Asked again on every look: a step that starts meanwhile is flagged too, and a
                    # run that had not reached its first call yet is marked once it does.
                    asked.update(await engine.cancel_run(run_id, me, wait_s=0))
                    row = await store.runs.get_run(run_id)
                    if row.status != RunStatus.RUNNING:
                        break
                    await anyio.sleep(CANCEL_POLL_S)
            row = await store.runs.get_run(run_id)
        stopped = row.status != RunStatus.RUNNING
        if state.json:
            emit_json({"runId": run_id, "status": row.status, "stopped": stopped, "cancelledExecutions": sorted(asked)})
        elif stopped:
            out.print(
                f"run {run_id}: {row.status}" + (f" ({len(asked)} running step(s) cancelled)" if asked else ""),
                markup=False,
            )
        else:
            err.print(f"asked run {run_id} to cancel; its process has not stopped it within {wait_s:g} s", markup=False)
        return 0 if stopped else EXIT_FAILED

    raise typer.Exit(run(body))


@deliverables_app.command("show")
def deliverables_show(
    deliverable_id: str = typer.Argument(..., help="Deliverable id (dlv_...) or its run id."),
) -> None:
    """Print a stored deliverable's content (with --json: everything).

    Example: toolagent deliverables show run_1767225600000_1a2b3c4d > report.md
    """

    async def body() -> None:
        async with open_store(state.db) as store:
            row = await store.runs.get_deliverable(deliverable_id)
        if state.json:
            emit_json(row.to_json())
        else:
            print(row.content, end="" if row.content.endswith("\n") else "\n")

    run(body)
