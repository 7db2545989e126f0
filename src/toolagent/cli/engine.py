"""`toolagent executions | history | metrics`: the engine's records of tool executions.

Commands that read executions act as the user given by `--user` / `TOOLAGENT_USER`, else as the
local user (created on first use). Users and API keys are `cli.principals`'s commands.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import typer
from rich.markup import escape
from rich.table import Table

from ..engine import HistoryQuery
from ..errors import UsageError
from ..model.execution import Execution
from ..model.status import ExecutionStatus
from ._app import app, emit_json, err, out, run, state
from ._runtime import open_engine
from ._tables import Column, fitted_table, time_cell

executions_app = typer.Typer(help="Tool executions: running ones, one in full, cancel, prune.", no_args_is_help=True)
app.add_typer(executions_app, name="executions")

#: Largest `--older-than-days` (a century): past it the cut-off date does not exist.
MAX_PRUNE_DAYS = 36_500


def _ms(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else ""


def parse_time(value: str | None, option: str, *, end_of_day: bool = False) -> datetime | None:
    """An ISO date or time (UTC when no zone); a bare date with `end_of_day` means the next midnight.

    Raises:
        UsageError: not ISO.
    """
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise UsageError(
            f"{option} {value!r} is not an ISO date or time: use e.g. 2025-01-31 or 2025-01-31T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if end_of_day and len(value) == 10:
        moment += timedelta(days=1)
    return moment


# -- executions ----------------------------------------------------------------------------------


def _print_execution(e: Execution) -> None:
    out.print(f"[bold]{escape(e.id)}[/] {escape(e.tool)} ({e.category}, risk {e.risk}): {e.status}", markup=True)
    out.print(
        f"  user {e.user} ({e.level or '?'})"
        + (f", key {e.api_key_id}" if e.api_key_id else "")
        + (f", run {e.run_id}" if e.run_id else "")
        + (f", session {e.session_id}" if e.session_id else ""),
        markup=False,
    )
    took = f"{e.duration_ms:.0f} ms" if e.duration_ms is not None else "running"
    out.print(f"  started {time_cell(e.started_at)}, {took}, timeout {e.timeout_ms} ms", markup=False)
    for label, value in (("reason", e.reason), ("error", e.error), ("cancel requested by", e.cancel_requested_by)):
        if value:
            out.print(f"  {label}: {value}", markup=False)


@executions_app.command("active")
def executions_active() -> None:
    """List running executions (yours; an admin sees everyone's) with their running time."""

    async def body() -> None:
        async with open_engine() as engine:
            me = await engine.principals.resolve_cli_user(state.user)
            rows = await engine.active(me)
            now = datetime.now(UTC)
        if state.json:
            emit_json({"executions": [e.to_json(now=now) for e in rows], "count": len(rows)})
            return
        table = Table("execution", "tool", "category", "user", "started", "running ms")
        for e in rows:
            table.add_row(e.id, e.tool, e.category, e.user, time_cell(e.started_at), _ms(e.running_time_ms(now)))
        out.print(table)
        err.print(f"{len(rows)} running", markup=False)

    run(body)


@executions_app.command("show")
def executions_show(execution_id: str = typer.Argument(..., help="Execution id (exec_...).")) -> None:
    """Show one execution (yours, or any for an admin)."""

    async def body() -> None:
        async with open_engine() as engine:
            me = await engine.principals.resolve_cli_user(state.user)
            e = await engine.get_execution(execution_id, me)
        if state.json:
            emit_json(e.to_json())
        else:
            _print_execution(e)

    run(body)


@executions_app.command("cancel")
def executions_cancel(
    execution_id: str = typer.Argument(..., help="Execution id (exec_...)."),
    wait_s: float = typer.Option(5.0, "--wait", min=0, help="Seconds to wait for it to stop."),
) -> None:
    """Cancel a running execution, in this process or another. Exit 0 when it stopped, 1 if still running."""

    async def body() -> int:
        async with open_engine() as engine:
            me = await engine.principals.resolve_cli_user(state.user)
            e = await engine.cancel(execution_id, me, wait_s=wait_s)
        if state.json:
            emit_json(
                {
                    "success": e.status != ExecutionStatus.RUNNING,
                    "executionId": e.id,
                    "status": e.status,
                    "reason": e.reason,
                    "message": f"execution {e.id} {'is ' + e.status if e.status != ExecutionStatus.RUNNING else 'asked to cancel'}",
                    "timestamp": datetime.now(UTC).isoformat(),
                }
            )
        elif e.status == ExecutionStatus.RUNNING:
            err.print(f"asked {e.id} to cancel; its process has not stopped it yet", markup=False)
        else:
            out.print(f"{e.id}: {e.status}" + (f" ({e.reason})" if e.reason else ""), markup=False)
        return 0 if e.status != ExecutionStatus.RUNNING else 1

    raise typer.Exit(run(body))


@executions_app.command("prune")
def executions_prune(
    older_than_days: int | None = typer.Option(
        None,
        "--older-than-days",
        min=0,
        max=MAX_PRUNE_DAYS,
        help="Delete executions that ended this many days ago. Default: retention_days.",
    ),
) -> None:
    """Delete old finished executions (running ones are kept)."""

    async def body() -> None:
        async with open_engine() as engine:
            n = await engine.prune(older_than_days)
        if state.json:
            emit_json({"deleted": n})
        else:
            out.print(f"deleted {n} executions", markup=False)

    run(body)


# -- history and metrics -------------------------------------------------------------------------


@app.command("history")
def history(
    tool: str | None = typer.Option(None, "--tool", help="Only this tool (namespace/tool)."),
    category: str | None = typer.Option(None, "--category", help="Only this category."),
    status: str | None = typer.Option(None, "--status", help="running, success, failed or cancelled."),
    since: str | None = typer.Option(None, "--since", help="Started at or after (ISO date/time, UTC if no zone)."),
    until: str | None = typer.Option(None, "--until", help="Started before (a bare date includes that whole day)."),
    limit: int = typer.Option(50, "--limit", help="Page size, 1-100."),
    offset: int = typer.Option(0, "--offset", help="Rows to skip."),
    all_users: bool = typer.Option(False, "--all", help="Everyone's executions (admins only)."),
    user: str | None = typer.Option(None, "--of", help="One user's executions (admins only)."),
) -> None:
    """Your tool executions, newest first, with statistics over everything the filters match."""

    async def body() -> None:
        query = HistoryQuery(
            tool=tool,
            category=category,
            status=status,
            since=parse_time(since, "--since"),
            until=parse_time(until, "--until", end_of_day=True),
            limit=limit,
            offset=offset,
            all_users=all_users,
            user=user,
        )
        async with open_engine() as engine:
            me = await engine.principals.resolve_cli_user(state.user)
            page = await engine.history(me, query)
        if state.json:
            emit_json(page.to_json())
            return
        columns = (
            Column("execution", keep=True),
            Column("tool", keep=True),
            Column("user", drop=2),
            Column("status"),
            Column("started", drop=3),
            Column("ms", justify="right", drop=1),
            Column("reason / error", drop=4),
        )
        cells = [
            (
                e.id,
                e.tool,
                e.user,
                e.status,
                time_cell(e.started_at),
                _ms(e.duration_ms),
                (e.reason or e.error or "")[:80],
            )
            for e in page.executions
        ]
        out.print(fitted_table(columns, cells, out.width, markup=False))
        s = page.stats
        err.print(
            f"{len(page.executions)} of {page.total_count} (offset {page.offset}); success {s.success}, "
            f"failed {s.failed} (denied {s.denied}), cancelled {s.cancelled}, running {s.running}; "
            f"average {s.average_ms:.0f} ms",
            markup=False,
        )

    run(body)


@app.command("metrics")
def metrics(
    tool: str | None = typer.Option(None, "--tool", help="Only this tool."),
    prometheus: bool = typer.Option(False, "--prometheus", help="Prometheus text exposition instead of tables."),
) -> None:
    """Tool metrics from the store: per tool, per user, per category, most used, denials, running."""

    async def body() -> None:
        async with open_engine() as engine:
            me = await engine.principals.resolve_cli_user(state.user)
            snap = await engine.metrics(tool, principal=me)
        if prometheus:
            from ..engine.prometheus import render

            print(render(snap.to_prometheus()), end="")
            return
        if state.json:
            emit_json(snap.to_json())
            return
        columns = (
            Column("tool", keep=True),
            Column("category", drop=2),
            Column("calls", justify="right"),
            Column("ok", justify="right"),
            Column("failed", justify="right"),
            Column("cancelled", drop=3, justify="right"),
            Column("avg ms", justify="right"),
            Column("p50 ms", drop=4, justify="right"),
            Column("p95 ms", drop=5, justify="right"),
            Column("last", drop=1),
        )
        cells = [
            (
                t.tool,
                t.category,
                str(t.invocations),
                str(t.successes),
                str(t.failures),
                str(t.cancelled),
                _ms(t.average_ms),
                _ms(t.p50_ms),
                _ms(t.p95_ms),
                time_cell(t.last_invoked),
            )
            for t in snap.tools
        ]
        out.print(fitted_table(columns, cells, out.width, markup=False))
        if snap.users:
            user_columns = (
                Column("user", keep=True),
                Column("total", justify="right"),
                Column("ok", justify="right"),
                Column("failed", justify="right"),
                Column("cancelled", justify="right"),
                Column("denied", justify="right"),
                Column("avg ms", justify="right"),
            )
            user_cells = [
                (
                    u.user,
                    str(u.total),
                    str(u.success),
                    str(u.failed),
                    str(u.cancelled),
                    str(u.denied),
                    _ms(u.average_ms),
                )
                for u in snap.users
            ]
            out.print(fitted_table(user_columns, user_cells, out.width, markup=False))
        if snap.denials:
            out.print(
                "denials: " + ", ".join(f"{d.tool} {d.reason} x{d.count}" for d in snap.denials),
                markup=False,
                soft_wrap=False,
            )
        if snap.most_used:
            out.print("most used: " + ", ".join(f"{n} ({c})" for n, c in snap.most_used), markup=False, soft_wrap=False)
        out.print(f"running now: {snap.active}", markup=False)

    run(body)
