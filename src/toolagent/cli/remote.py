"""The commands `--api URL` (or `TOOLAGENT_API_URL`) sends to a running `toolagent serve`.

`tools list | show | call`, `build`, `runs list | show` take the same options as their local
commands (tests/unit/cli/test_remote_options.py keeps them in step), print the same through
`_shown.py` and end with the same exit codes; they ask the REST API instead of opening the store
and starting servers, so the servers stay up between commands and a command costs one or two
HTTP requests. Nothing of the runtime, the MCP SDK or SQLAlchemy is imported here.

Other commands: given `--api`, they say they work on a local store only; given only
`TOOLAGENT_API_URL`, they run locally as usual (`toolagent keys create` must work beside it).
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import quote

import typer
from typer.core import TyperCommand, TyperGroup

from ..model.execution import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS
from ..model.permissions import CATEGORIES
from ._app import COMMANDS, EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, fail, read_json_arg, state
from ._remote_http import Answer, Api
from ._shown import (
    build_done,
    build_json,
    denial_message,
    failure_message,
    run_list,
    run_shown,
    succeeded,
    tool_details,
    tool_listing,
    tool_result,
)

#: Commands (and the subcommands of groups) sent to the API.
REMOTE: dict[str, frozenset[str] | None] = {
    "tools": frozenset({"list", "show", "call"}),
    "build": None,
    "runs": frozenset({"list", "show"}),
}


def _local_only(name: str) -> str:
    return (
        f"`toolagent {name}` works on a local store only, not with --api: run it without --api "
        "(where the server's store is), or use the HTTP API"
    )


class RemoteGroup(TyperGroup):
    """A group of commands sent to the API; a subcommand it lacks runs locally when only
    `TOOLAGENT_API_URL` asked for the API, and is refused when `--api` did."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        group = self.name or ""
        if from_environment(ctx):
            local = _local_group(ctx, group)
            return local.get_command(ctx, cmd_name) if local is not None else None
        return _refusal(cmd_name, _local_only(f"{group} {cmd_name}"))


def from_environment(ctx: Any) -> bool:
    """Only `TOOLAGENT_API_URL` (no `--api` anywhere on the command line) asked for the API."""
    import sys

    root = ctx.find_root()
    given = getattr(root.get_parameter_source("api"), "name", None)
    return given == "ENVIRONMENT" and not any(a == "--api" or a.startswith("--api=") for a in sys.argv[1:])


def _local_group(ctx: Any, name: str) -> Any:
    root = ctx.find_root().command
    importlib.import_module(f"{__package__}.{COMMANDS[name][0]}")
    root._convert_registered()
    return root.commands.get(name)


def _refusal(name: str, message: str) -> TyperCommand:
    def refuse() -> None:
        fail(message, EXIT_USAGE)

    return TyperCommand(
        name=name,
        callback=refuse,
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        help=message,
    )


def remote_command(ctx: Any, name: str, globals_: list[Any]) -> Any:
    """The command `name` as `--api` runs it: sent to the API, run locally, or refused."""
    from ._app import add_global_options

    if name in REMOTE:
        command = _built().get(name)
        add_global_options(command, globals_)
        return command
    if name not in COMMANDS:
        return None
    if from_environment(ctx):
        return None  # the local command
    return _refusal(name, _local_only(name))


_BUILT: dict[str, Any] = {}


def _built() -> dict[str, Any]:
    if not _BUILT:
        group = typer.main.get_command(remote_app)
        _BUILT.update(getattr(group, "commands", {}))
    return _BUILT


remote_app = typer.Typer(rich_markup_mode="markdown")
tools_app = typer.Typer(cls=RemoteGroup, help="List, inspect and call the tools of a running `toolagent serve`.")
runs_app = typer.Typer(cls=RemoteGroup, help="Inspect the BUILD runs of a running `toolagent serve`.")
remote_app.add_typer(tools_app, name="tools")
remote_app.add_typer(runs_app, name="runs")


def _bare_name(name: str) -> None:
    ns, sep, tool = name.partition("/")
    if not sep or not ns or not tool:
        fail(
            f"Tool '{name}' must include namespace: expected 'namespace/tool'. `toolagent tools list` shows the names",
            EXIT_USAGE,
        )


# -- tools --------------------------------------------------------------------------------------


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
    """List the server's tools by category, with their risk and whether you may run them (GET /api/tools)."""
    params: dict[str, Any] = {"tags": tag, "includeDeprecated": str(include_deprecated).lower()}
    if category is not None:
        params["category"] = category
    if search is not None:
        params["search"] = search
    with Api() as api:
        answer = api.get("/api/tools", params=params)
        if not answer.ok:
            api.fail(answer)
    data = {k: v for k, v in answer.body.items() if k != "success"}
    if server is not None:
        data = _of_server(data, server)
    if state.json:
        emit_json({**data, "errors": {}})
    else:
        tool_listing(data)


def _of_server(data: dict[str, Any], server: str) -> dict[str, Any]:
    """A listing narrowed to one server's tools (the API lists every server's)."""

    def mine(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [t for t in tools if t.get("server") == server]

    categorized = {c: mine(ts) for c, ts in data["categorizedTools"].items()}
    categorized = {c: ts for c, ts in categorized.items() if ts}
    tools = mine(data["tools"])
    return {
        **data,
        "tools": tools,
        "categorizedTools": categorized,
        "totalCount": len(tools),
        "categories": list(categorized),
    }


@tools_app.command("show")
def tools_show(name: str = typer.Argument(..., help="Tool as namespace/tool, e.g. supabase/get-schema.")) -> None:
    """Show one tool in full, with its metrics and your own use of it (GET /api/tools/{name})."""
    _bare_name(name)
    with Api() as api:
        answer = api.get(f"/api/tools/{quote(name, safe='/')}")
        if not answer.ok:
            _unknown_tool(api, answer, name)
            api.fail(answer)
    data = {k: v for k, v in answer.body.items() if k != "success"}
    if state.json:
        emit_json(data)
    else:
        tool_details(data)


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
    """Call one tool through the server's execution engine and print its result (POST /api/tools/execute).

    Exit 0 success; 1 the tool failed, or the call was denied, rejected, rate limited, timed out or
    cancelled; 2 bad input (name, --args, --timeout, an unknown --agent).
    """
    arguments = read_json_arg(args, "--args")
    if not isinstance(arguments, dict):
        fail('--args must be a JSON object, e.g. --args \'{"text": "hi"}\'', EXIT_USAGE)
    if timeout_ms is not None and not MIN_TIMEOUT_MS <= timeout_ms <= MAX_TIMEOUT_MS:
        fail(f"--timeout must be between {MIN_TIMEOUT_MS} and {MAX_TIMEOUT_MS} ms, got {timeout_ms}", EXIT_USAGE)
    _bare_name(name)
    body: dict[str, Any] = {"name": name, "arguments": arguments}
    if timeout_ms is not None:
        body["timeout"] = timeout_ms
    if agent is not None:
        body["agent"] = agent
    with Api() as api:
        answer = api.post("/api/tools/execute", body)
        raise typer.Exit(_report(api, answer, name=name, agent=agent))


def _record(api: Api, execution_id: str) -> dict[str, Any]:
    answer = api.get(f"/api/tools/executions/{quote(execution_id, safe='')}")
    if not answer.ok:
        api.fail(answer)
    execution: dict[str, Any] = answer.body["execution"]
    return execution


def _unknown_tool(api: Api, answer: Answer, name: str) -> None:
    """A tool the server does not have, worded as the local command words it (the API names the
    tool first, then what the catalogue said)."""
    said = answer.message.removeprefix(f"tool '{name}' not found: ")
    if said != answer.message and said.startswith("server "):
        fail(said, EXIT_FAILED)


def _report(api: Api, answer: Answer, *, name: str, agent: str | None) -> int:
    """Print a call's answer as `tools call` prints its outcome; its exit code."""
    if answer.ok:
        if state.json:
            emit_json(_record(api, answer.body["executionId"]))
        else:
            tool_result(answer.body.get("result"))
            succeeded(answer.body["executionId"], answer.body.get("executionTime"))
        return EXIT_OK
    code = answer.error.get("code")
    execution_id = answer.details.get("executionId")
    if code == "NOT_FOUND" and agent is not None and not answer.message.startswith("tool "):
        fail(f"--agent: {answer.message}", EXIT_USAGE)  # as the local command words an unknown agent
    if code == "TOO_MANY_REQUESTS":
        fail(_limit_message(answer), EXIT_FAILED)
    if code == "NOT_FOUND":
        _unknown_tool(api, answer, name)
    if execution_id is None:
        api.fail(answer)  # refused before the gate (arguments, the SQL guard): nothing was recorded
    execution = _record(api, str(execution_id))
    if state.json:
        emit_json(execution)
    if code == "FORBIDDEN":
        fail(denial_message(answer.message, answer.details.get("fix"), str(execution_id)), EXIT_FAILED)
    result = execution.get("result")
    if not state.json and result is not None and result.get("structuredContent") is not None:
        tool_result(result)
    fail(failure_message(execution), EXIT_FAILED)


def _limit_message(answer: Answer) -> str:
    import math

    if answer.details.get("denial") == "budget":
        return f"budget used up: {answer.message}"
    lines = [f"rate limited: {answer.message}"]
    limit, remaining = answer.headers.get("X-RateLimit-Limit"), answer.headers.get("X-RateLimit-Remaining", "0")
    retry = answer.headers.get("Retry-After")
    if limit is not None and retry is not None:
        lines.append(f"limit {limit}, remaining {remaining}, retry after {math.ceil(float(retry))} s")
    return "\n".join(lines)


# -- build and runs -------------------------------------------------------------------------------


@remote_app.command("build")
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
    """Run a stored agent's BUILD on the server (POST /api/agents/{org}/{slug}/build) and print its deliverable.

    Exit 0 when the run succeeded, 1 when it failed or was cancelled, 2 on usage errors.
    """
    from pathlib import Path

    body_payload = read_json_arg(payload, "--payload")
    body_override = read_json_arg(override, "--override")
    if body_payload is not None and not isinstance(body_payload, dict):
        fail("--payload must be a JSON object", EXIT_USAGE)
    if body_override is not None and not isinstance(body_override, dict):
        fail("--override must be a JSON object with tools, toolParams, toolExecutionMode or stopOnError", EXIT_USAGE)
    if submit or wait:
        fail(
            "--submit and --wait do not go with --api: the server decides where its runs execute "
            "(`toolagent serve --submit`, or TOOLAGENT_EXECUTION=queue where it runs)",
            EXIT_USAGE,
        )
    org, sep, slug = agent.partition("/")
    if Path(agent).is_file() or not sep or not org or not slug or "/" in slug:
        fail(
            f"with --api, build a stored agent by ORG/SLUG, not {agent!r}: store a file first "
            "(PUT /api/agents/{org}/{slug}, or `toolagent agents upsert FILE` on the server's store)",
            EXIT_USAGE,
        )
    body: dict[str, Any] = {"payload": body_payload or {}, **(body_override or {})}
    if fmt is not None:
        body["format"] = fmt
    with Api() as api:
        answer = api.post(f"/api/agents/{quote(org, safe='')}/{quote(slug, safe='')}/build", body)
        if not answer.ok:
            api.fail(answer)
    run, deliverable, ok = answer.body["run"], answer.body["deliverable"], bool(answer.body["success"])
    if state.json:
        emit_json(build_json(run, deliverable))
    else:
        build_done(run, deliverable, ok=ok)
    raise typer.Exit(EXIT_OK if ok else EXIT_FAILED)


@runs_app.command("list")
def runs_list(
    agent: str | None = typer.Option(None, "--agent", help="Only runs of ORG/SLUG."),
    status: str | None = typer.Option(None, "--status", help="success, failed, cancelled or running."),
    limit: int = typer.Option(20, "--limit", min=1, max=500, help="How many (newest first)."),
) -> None:
    """List your recent runs on the server (an admin's key: everyone's), newest first (GET /api/runs)."""
    parts = agent.split("/", 1) if agent else None
    if parts is not None and (len(parts) != 2 or not all(parts)):
        fail(f"--agent {agent!r} is not ORG/SLUG: use e.g. --agent demo/supabase-agent", EXIT_USAGE)
    params: dict[str, Any] = {"limit": limit}
    if agent is not None:
        params["agent"] = agent
    if status is not None:
        params["status"] = status
    with Api() as api:
        answer = api.get("/api/runs", params=params)
        if not answer.ok:
            api.fail(answer)
    rows = answer.body["runs"]
    if state.json:
        emit_json(rows)
    else:
        run_list(rows)


@runs_app.command("show")
def runs_show(run_id: str = typer.Argument(..., help="Run id (run_...).")) -> None:
    """Show a run of yours on the server and its steps (GET /api/runs/{id})."""
    with Api() as api:
        answer = api.get(f"/api/runs/{quote(run_id, safe='')}")
        if not answer.ok:
            api.fail(answer)
    shown = answer.body["run"]
    if state.json:
        emit_json(shown)
    else:
        run_shown(shown)


__all__ = ["REMOTE", "remote_app", "remote_command"]
