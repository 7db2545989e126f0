"""`toolagent tools list | show | call`: the configured MCP servers' tools, through the execution engine.

Every command acts as the `--user` / `TOOLAGENT_USER` principal, else as the local user (created
on first use at the engine config's `local_user_level`). `list` and `show` mark what that user
may run; `call` goes through the runtime's tool stack, so it is gated (level against risk, rate
limit, budget), recorded in `toolagent history`, bounded by its timeout and cancellable by id.
"""

from __future__ import annotations

import contextlib
import json
import math
import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import replace

import typer
from rich.markup import escape

from ..engine import ExecutionDenied, Principal
from ..engine.permissions import parse_category
from ..errors import ArgumentsInvalid, BudgetExceeded, NotFound, RateLimited, UsageError
from ..mcp.config import ServersConfig
from ..model.execution import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, Execution
from ..model.permissions import CATEGORIES
from ..model.status import CallStatus, ExecutionStatus
from ..runtime import Runtime, open_runtime
from ..store import Store
from ..tools.base import CallContext, CallOutcome
from ..tools.records import answered
from ..tools.under_agent import under_agent
from ._app import EXIT_FAILED, app, emit_json, err, fail, read_json_arg, run, state
from ._shown import denial_message, failure_message, succeeded, tool_details, tool_listing, tool_result

tools_app = typer.Typer(
    help=(
        "List, inspect and call the tools of the configured MCP servers. Calls go through the execution "
        "engine: gated by your level against the tool's risk, rate limited, recorded in `toolagent history`."
    ),
    no_args_is_help=True,
)
app.add_typer(tools_app, name="tools")

# -- shared with `build` ------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def cli_runtime(
    servers: ServersConfig, *, store: Store | None = None
) -> AsyncIterator[tuple[Runtime, Principal]]:
    """The runtime (store, `EngineConfig.load()`, the server pool) and the CLI's principal.

    The principal is resolved before any server starts (servers start on first use), so an
    unknown `--user` fails at once.

    Raises:
        ConfigError: the engine config is invalid.
        NotFound: `--user` names no user.
    """
    async with open_runtime(state.db, servers, store=store, on_starting=_starting) as runtime:
        yield runtime, await runtime.principal(state.user)


def _starting(name: str, limit_s: float) -> None:
    # Printed only when a start takes over a second, so a slow or hung server is not silence.
    err.print(f"starting MCP server '{name}' (waiting up to {limit_s:g} s) ...", markup=False)


def namespaces_of(tools: Iterable[str]) -> list[str]:
    """The server names of qualified tool names, in first-use order."""
    return list(dict.fromkeys(t.partition("/")[0] for t in tools))


async def _check_name(name: str, servers: ServersConfig) -> None:
    from ..agents.validation import msg_no_namespace

    ns, sep, tool = name.partition("/")
    if not sep or not ns or not tool:
        meant = (await qualified_matches([tool or ns or name], servers)).get(tool or ns or name)
        hint = f"; did you mean {' or '.join(repr(m) for m in meant)}?" if meant else ""
        raise UsageError(msg_no_namespace(name) + hint + " `toolagent tools list` shows the names")


#: How long the servers may take to list their tools when only a suggestion depends on it.
SUGGESTION_WAIT_S = 20.0


async def qualified_matches(names: Iterable[str], servers: ServersConfig) -> dict[str, list[str]]:
    """For each tool name given without its namespace, the configured `namespace/tool` names it
    may mean: the tools of that name on any server, else the closest names. Starts the servers
    (an error path pays for it, to name the fix); a server that does not answer in time is left out.
    """
    import difflib

    import anyio

    wanted = [n for n in names if n]
    if not wanted or not servers.enabled:
        return {}
    qualified: list[str] = []
    with anyio.move_on_after(SUGGESTION_WAIT_S):
        async with open_runtime(state.db, servers) as runtime:
            await runtime.catalogue.refresh()
            qualified = [entry.name for entry in runtime.catalogue.registry.entries()]
    out: dict[str, list[str]] = {}
    for name in wanted:
        exact = [q for q in qualified if q.partition("/")[2] == name]
        if exact:
            out[name] = exact
            continue
        by_tool: dict[str, list[str]] = {}
        for q in qualified:
            by_tool.setdefault(q.partition("/")[2], []).append(q)
        close = difflib.get_close_matches(name, list(by_tool), n=3, cutoff=0.6)
        if close:
            out[name] = [q for c in close for q in by_tool[c]]
    return out


# -- list ---------------------------------------------------------------------------------------


@tools_app.command("list")
def tools_list(
    server: str | None = typer.Option(None, "--server", help="Only this server's tools (only it is started)."),
    category: str | None = typer.Option(None, "--category", "-c", help=f"Only this category: {', '.join(CATEGORIES)}."),
    search: str | None = typer.Option(
        None, "--search", "-s", help="Only tools whose name, title or description contains TEXT."
    ),
    tag: list[str] = typer.Option([], "--tag", "-t", help="Only tools with this tag (repeatable: all must match)."),
    include_deprecated: bool = typer.Option(False, "--include-deprecated", help="Also list deprecated tools."),
) -> None:
    """List tools by category, with their risk and whether you may run them.

    Risk comes from the server config ("risk" in mcp.json), the engine config, the built-in
    table or, for servers marked trusted, their annotations; unclassified tools are dangerous.
    Unreachable servers are reported on stderr. Exit 1 only when no server answered.

    Example: toolagent tools list --category database --search sql
    """

    async def body() -> None:
        if category is not None:
            parse_category(category)
        servers = ServersConfig.load(state.servers)
        async with cli_runtime(servers) as (runtime, me):
            if server is not None:
                await runtime.catalogue.refresh_one(server)
                errors: dict[str, str] = {}
            else:
                errors = await runtime.catalogue.refresh()
            listing = await runtime.list_tools(
                me, category=category, search=search, tags=tag, include_deprecated=include_deprecated
            )
        shown = {**listing.to_json(), "user": {"name": me.name, "level": me.level}}
        if state.json:
            emit_json({**shown, "errors": errors})
        else:
            tool_listing(shown)
        for name, why in errors.items():
            err.print(f"[red]unavailable[/] {escape(name)}: {escape(why)}", markup=True)
        if errors and len(runtime.catalogue) == 0:  # no server answered
            raise typer.Exit(EXIT_FAILED)

    run(body)


# -- show ---------------------------------------------------------------------------------------


@tools_app.command("show")
def tools_show(name: str = typer.Argument(..., help="Tool as namespace/tool, e.g. supabase/get-schema.")) -> None:
    """Show one tool in full, with its metrics and your own use of it.

    Description, input schema, category, risk and where it came from, whether you may run it,
    tags, version, enabled/deprecated, timeout; then everyone's figures and yours.

    Example: toolagent tools show supabase/execute-sql
    """

    async def body() -> None:
        servers = ServersConfig.load(state.servers)
        await _check_name(name, servers)
        async with cli_runtime(servers) as (runtime, me):
            await runtime.tools.resolve(name)  # names the configured servers, or the server's tools, when wrong
            await runtime.catalogue.refresh([name.partition("/")[0]])
            details = await runtime.tool_details(name, me)
        shown = {**details.to_json(), "user": {"name": me.name, "level": me.level}}
        if state.json:
            emit_json(shown)
        else:
            tool_details(shown)

    run(body)


# -- call ---------------------------------------------------------------------------------------


def _denial_message(
    exc: ExecutionDenied, me: Principal, *, risk_source: str | None = None, config_file: str | None = None
) -> str:
    from ..engine.hints import denial_fix

    fix = denial_fix(exc, me.name, risk_source=risk_source, config_file=config_file)
    return denial_message(exc.message, fix, exc.execution_id)


def _limit_message(exc: RateLimited | BudgetExceeded) -> str:
    limit = getattr(exc, "limit", None)
    retry = getattr(exc, "retry_after_s", None)
    kind = "rate limited" if isinstance(exc, RateLimited) else "budget used up"
    lines = [f"{kind}: {exc.message}"]
    if limit is not None and retry is not None:
        lines.append(f"limit {limit}, remaining {getattr(exc, 'remaining', 0)}, retry after {math.ceil(retry)} s")
    return "\n".join(lines)


@tools_app.command("call")
def tools_call(
    name: str = typer.Argument(..., help="Tool as namespace/tool, e.g. supabase/get-schema."),
    args: str = typer.Option("{}", "--args", "-a", help="Arguments JSON or @file.json."),
    timeout_ms: int | None = typer.Option(
        None,
        "--timeout",
        help=f"Timeout in ms ({MIN_TIMEOUT_MS}-{MAX_TIMEOUT_MS}). Default: the server's "
        "timeout_s in mcp.json, else the engine config's default_timeout_ms (30000).",
    ),
    agent: str | None = typer.Option(
        None,
        "--agent",
        help="Call under this agent (org/slug): the tool must be in its tool list and its "
        "security block (SQL denylist, table allowlist) applies, as in a BUILD step.",
    ),
) -> None:
    """Call one tool through the execution engine and print its result.

    The call is gated (your level against the tool's risk, rate limit, monthly budget), recorded in
    `toolagent history` and cancelled at the timeout. Its execution id is printed on stderr as it
    starts, so `toolagent executions cancel ID` stops it from another terminal. With --json, stdout
    is the execution record (status, result, error, timing).

    With --agent ORG/SLUG the call is made under that agent: a tool outside its tool list is
    denied, and SQL breaking its security block is rejected before it is sent.

    Exit 0 success; 1 the tool failed, or the call was denied, rejected, rate limited, timed out or
    cancelled; 2 bad input (name, --args, --timeout, an unknown --agent).

    Example: toolagent tools call supabase/generate-sql --args '{"query": "top 10 conversations by date"}' --timeout 5000
    """
    arguments = read_json_arg(args, "--args")

    async def body() -> int:
        if not isinstance(arguments, dict):
            raise UsageError('--args must be a JSON object, e.g. --args \'{"text": "hi"}\'')
        if timeout_ms is not None and not MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS:
            raise UsageError(f"--timeout must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS} ms, got {timeout_ms}")
        servers = ServersConfig.load(state.servers)
        await _check_name(name, servers)
        async with cli_runtime(servers) as (runtime, me):
            ctx = CallContext(me, timeout_ms=timeout_ms)
            if agent is not None:  # before any server starts: an unknown agent fails at once
                try:
                    ctx = await under_agent(runtime.store, agent, ctx)
                except NotFound as exc:
                    raise UsageError(f"--agent: {exc.message}") from exc
            entry = await runtime.tools.resolve(name)
            await runtime.catalogue.refresh([entry.spec.server])

            def announce(started: Execution) -> None:
                if state.json:
                    err.print(
                        json.dumps(
                            {
                                "executionId": started.id,
                                "status": ExecutionStatus.RUNNING,
                                "tool": started.tool,
                                "timeoutMs": started.timeout_ms,
                            }
                        ),
                        markup=False,
                    )
                else:
                    err.print(
                        f"[dim]execution {started.id} started (timeout {started.timeout_ms} ms);"
                        f" stop it with: toolagent executions cancel {started.id}[/]",
                        markup=True,
                    )

            outcome = answered(await runtime.tools.call(entry, arguments, replace(ctx, on_admitted=announce)))
            # Reported (and the exit decided) before the runtime closes: a server still busy with
            # the abandoned call can take seconds to stop, and the answer is due at the limit.
            try:
                return _report(
                    outcome, me, risk_source=entry.risk_source, config_file=servers.file_of(entry.spec.server)
                )
            finally:
                sys.stdout.flush()
                sys.stderr.flush()

    raise typer.Exit(run(body))


def _report(
    outcome: CallOutcome, me: Principal, *, risk_source: str | None = None, config_file: str | None = None
) -> int:
    """Print a call's outcome: its result and 0, or its error line and exit 1 (2 for bad arguments).
    A denial's fix is worded for the tool's `risk_source`, naming the server's `config_file`."""
    execution: Execution | None = outcome.record
    problem: str | None = None
    exc = outcome.exception
    if isinstance(exc, ArgumentsInvalid):
        raise exc  # bad input: exit 2, like any other usage error
    if execution is None and exc is not None and outcome.status is not CallStatus.DENIED:
        fail(exc.message, EXIT_FAILED)  # refused before the gate (the SQL guard): nothing was recorded
    if outcome.status is CallStatus.DENIED:
        if isinstance(exc, ExecutionDenied):
            problem = _denial_message(exc, me, risk_source=risk_source, config_file=config_file)
        elif isinstance(exc, RateLimited | BudgetExceeded):
            execution, problem = None, _limit_message(exc)
        else:
            problem = f"denied: {outcome.error}"
    if state.json and execution is not None:
        emit_json(execution.to_json())
    if problem is None and execution is not None and execution.status != ExecutionStatus.SUCCESS:
        if not state.json and execution.result is not None and execution.result.structured is not None:
            tool_result(execution.result.to_json())
        problem = failure_message(execution.to_json())
    if problem is not None:
        fail(problem, EXIT_FAILED)
    if execution is not None and not state.json:
        if execution.result is not None:
            tool_result(execution.result.to_json())
        succeeded(execution.id, execution.duration_ms)
    return 0
