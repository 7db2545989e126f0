"""What the commands print, from the JSON form of what they show (`to_json()` locally, the REST
API's answer with `--api`), so a command prints the same whether it opened the store itself or
asked a running `toolagent serve`.

Imports nothing that opens a store or a server: the `--api` path loads this and `cli/remote.py` only.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..model.permissions import can_run, levels_for
from ..runs.flow import FlowCap
from ._app import err, out
from ._tables import Column, fitted_table

#: What the terminal shows of a value (the store keeps everything).
TERMINAL_CAP = FlowCap(max_items=20, max_chars=4000)

_CATEGORY_SOURCES = {
    "operator": 'set by the operator ("category" in mcp.json, or the engine config)',
    "server": "from the server's name",
    "tool": "from the tool's name or title",
    "annotations": "from the server's annotations (openWorldHint)",
    "default": 'default: set "category" in mcp.json to change it',
}
_RISK_SOURCES = {
    "operator": 'set by the operator ("risk" in mcp.json, or the engine config)',
    "table": "from the built-in risk table",
    "annotations": "from the server's annotations (the server is marked trusted)",
    "default": 'default: unclassified tools are dangerous; set "risk" in mcp.json to change it',
}
#: A step's status as a mark.
MARKS: dict[str, str] = {
    "success": "[green]✓[/]",
    "failed": "[red]✗[/]",
    "denied": "[red]⊘[/]",
    "skipped": "[yellow]-[/]",
    "cancelled": "[yellow]⊗[/]",
}

Json = Mapping[str, Any]


def count(n: int, noun: str) -> str:
    """`1 tool`, `2 tools`, `3 categories`."""
    return f"{n} {noun if n == 1 else (noun[:-1] + 'ies' if noun.endswith('y') else noun + 's')}"


def _when(value: str | None) -> str:
    return datetime.fromisoformat(value).isoformat(timespec="seconds") if value else "never"


def may_run(tool: Json, user: Json) -> str:
    """The "you may run" column: yes, or why not (the operator's switch, the level it needs)."""
    if tool.get("runnable"):
        return "yes"
    if not tool.get("enabled", True):
        return "no: disabled"
    risk = str(tool.get("risk"))
    if not can_run(str(user.get("level")), risk):
        return f"no: needs {levels_for(risk)[0] if levels_for(risk) else 'a known risk'}"
    return "no: denied by the operator's policy"


# -- tools ----------------------------------------------------------------------------------------


def tool_listing(data: Json) -> None:
    """`tools list`: the table on stdout and the summary line on stderr, from a listTools answer
    with its `user`."""
    user = data["user"]
    categorized: Mapping[str, Sequence[Json]] = data["categorizedTools"]
    rows = [
        (
            cat if i == 0 else "",
            e["name"] + (" (deprecated)" if e.get("deprecated") else ""),
            str(e["risk"]),
            may_run(e, user),
            e["description"].strip().splitlines()[0] if (e.get("description") or "").strip() else "",
            i == len(entries) - 1,
        )
        for cat, entries in categorized.items()
        for i, e in enumerate(entries)
    ]
    # Names are never cut; the description gets one line of what the other columns leave.
    fixed = [
        max([len(h), *(len(str(r[k])) for r in rows)])
        for k, h in enumerate(("category", "tool", "risk", "you may run"))
    ]
    table = Table("category", "tool", "risk", "you may run")
    for column in table.columns:
        column.no_wrap = True
    table.add_column(
        "description", no_wrap=True, overflow="ellipsis", max_width=max(10, out.width - sum(fixed) - 16)
    )  # 5 columns: padding 2 each, 6 rules
    for cat, name, risk, may, desc, last in rows:
        table.add_row(cat, escape(name), risk, may, escape(desc), end_section=last)
    out.print(table)
    runnable = sum(1 for e in data["tools"] if e.get("runnable"))
    err.print(
        f"{count(int(data['totalCount']), 'tool')} in {count(len(categorized), 'category')}; "
        f"you ({user['name']}, {user['level']}) may run {runnable}. Details: toolagent tools show NAME",
        markup=False,
    )


def tool_details(data: Json) -> None:
    """`tools show`: one tool in full, from a getToolDetails answer with its `user`."""
    e, m, u, user = data["tool"], data["metrics"], data["userStats"], data["user"]
    out.print(
        f"[bold]{escape(e['name'])}[/]"
        + (f" — {escape(e['title'])}" if e.get("title") else "")
        + f" [dim](server {escape(e['server'])})[/]",
        markup=True,
    )
    if e.get("description"):
        for line in inspect.cleandoc(e["description"]).splitlines():
            out.print(f"  {line}", markup=False)
    status = ("enabled" if e["enabled"] else "disabled") + (", deprecated" if e.get("deprecated") else "")
    timeout_ms = int(data["timeoutMs"])
    rows = [
        ("category", f"{e['category']} — {_CATEGORY_SOURCES.get(e['categorySource'], e['categorySource'])}"),
        ("risk", f"{e['risk']} — {_RISK_SOURCES.get(e['riskSource'], e['riskSource'])}"),
        ("you may run", f"{may_run(e, user)} ({user['name']}, {user['level']})"),
        ("tags", ", ".join(e.get("tags") or ()) or "-"),
        ("version", e.get("version") or "-"),
        ("status", status),
        (
            "timeout",
            f"{timeout_ms / 1000:g} s (server config)"
            if data.get("timeoutSource") == "server"
            else f"{timeout_ms} ms (engine default)",
        ),
    ]
    for label, value in rows:
        out.print(f"  {label:<12} {value}", markup=False)
    out.print("input schema:", markup=False)
    out.print(json.dumps(e["inputSchema"], indent=2), markup=False)
    out.print(
        f"metrics:     calls {m['totalInvocations']}: {m['successfulInvocations']} ok, {m['failedInvocations']} failed, "
        f"{m['cancelledInvocations']} cancelled; avg {m['averageExecutionTime']:.0f} ms, "
        f"p50 {m.get('p50ExecutionTime', 0):.0f} ms, p95 {m.get('p95ExecutionTime', 0):.0f} ms; "
        f"last {_when(m.get('lastInvoked'))}",
        markup=False,
    )
    out.print(
        f"your use:    executions {u['totalExecutions']}: {u['successfulExecutions']} ok, "
        f"{u['failedExecutions']} failed, {u.get('cancelledExecutions') or 0} cancelled, "
        f"{u.get('deniedExecutions') or 0} denied; avg {u['averageExecutionTime']:.0f} ms; "
        f"last {_when(u.get('lastExecuted'))}",
        markup=False,
    )


def tool_result(result: Json | None) -> None:
    """A tool's result on stdout: its structured content (capped for the terminal), else its text."""
    if result is None:
        return
    if result.get("structuredContent") is not None:
        print(json.dumps(TERMINAL_CAP.apply(result["structuredContent"]), indent=2, default=str))
    elif result.get("text"):
        print(result["text"])


def failure_message(execution: Json) -> str:
    """Why an execution did not succeed, and where to read it (`executions show`)."""
    if execution["status"] == "cancelled":
        reason = execution.get("reason") or "cancelled"
        line = f"cancelled: {reason}" if not reason.startswith("cancelled") else reason
    else:
        line = f"tool '{execution['toolName']}' failed: {execution.get('error') or 'the tool reported an error'}"
    return f"{line}\nexecution {execution['id']} (toolagent executions show {execution['id']})"


def denial_message(message: str, fix: str | None, execution_id: str | None) -> str:
    """A refused call: the refusal, what would allow it, and its record."""
    lines = [f"denied: {message}"]
    if fix:
        lines.append(f"fix: {fix}")
    if execution_id:
        lines.append(f"recorded as execution {execution_id} (toolagent executions show {execution_id})")
    return "\n".join(lines)


def succeeded(execution_id: str, duration_ms: float | None) -> None:
    """The last line of a successful call, on stderr."""
    err.print(f"[dim]execution {execution_id}: success in {duration_ms or 0:.0f} ms[/]", markup=True)


# -- runs -----------------------------------------------------------------------------------------


def _started(value: str | None) -> str:
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S") if value else ""


def run_list(rows: Sequence[Json]) -> None:
    """`runs list`: the runs as a table."""
    columns = (
        Column("run", keep=True),
        Column("agent", keep=True),
        Column("status"),
        Column("mode", drop=2),
        Column("started"),
        Column("ms", justify="right", drop=3),
        Column("deliverable", keep=True, drop=1),
    )
    cells = [
        (
            r["id"],
            r["agent"],
            r["status"],
            r["executionMode"],
            _started(r.get("startedAt")),
            f"{r.get('durationMs') or 0:.0f}",
            r.get("deliverableId") or "",
        )
        for r in rows
    ]
    out.print(fitted_table(columns, cells, out.width, markup=False))


def run_shown(run: Json) -> None:
    """`runs show`: a run and its steps (status, duration, error, where chained arguments came from)."""
    out.print(
        f"[bold]{run['id']}[/] {run['agent']}: {run['status']} "
        f"({run['executionMode']}, {run.get('durationMs') or 0:.0f} ms) deliverable {run.get('deliverableId')}"
    )
    if run.get("error"):
        out.print(f"[red]{run['error']}[/]")
    for s in run.get("steps") or ():
        mark = MARKS.get(s["status"], "?")
        out.print(
            f"{mark} {s['position']}. {s['tool']} {s['status']} {s.get('durationMs') or 0:.0f} ms"
            + (f" — {s['error']}" if s.get("error") else "")
        )
        if s.get("paramSources"):
            chained = {k: v for k, v in s["paramSources"].items() if v != "params"}
            if chained:
                out.print(f"   [dim]arguments from: {json.dumps(chained)}[/]")


def build_json(run: Json, deliverable: Json) -> dict[str, Any]:
    """`build --json`: the run's id and status with its deliverable."""
    return {
        "runId": run["id"],
        "status": run["status"],
        "deliverableId": deliverable["id"],
        "deliverable": {k: deliverable[k] for k in ("id", "format", "type", "metadata", "data")},
    }


def build_done(run: Json, deliverable: Json, *, ok: bool) -> None:
    """`build`: the deliverable on stdout, the run's end on stderr."""
    content = deliverable["content"]
    print(content, end="" if content.endswith("\n") else "\n")
    colour = "green" if ok else "red"
    err.print(
        f"[{colour}]run {run['id']}: {run['status']}[/] — deliverable {deliverable['id']}"
        + (f" — {run['error']}" if run.get("error") else ""),
        markup=True,
    )


__all__ = [
    "MARKS",
    "TERMINAL_CAP",
    "build_done",
    "build_json",
    "count",
    "denial_message",
    "failure_message",
    "may_run",
    "run_list",
    "run_shown",
    "succeeded",
    "tool_details",
    "tool_listing",
    "tool_result",
]
