"""The typer application, global options, output helpers and the error -> exit code mapping."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import typer
from rich.console import Console

from ..errors import ToolAgentError
from ..inputs import InputProblem, parse_json

T = TypeVar("T")

#: Exit codes scripts can trust.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

app = typer.Typer(
    name="toolagent",
    help=(
        "Run tool agents: namespaced MCP tool chains with validation, permissions and deliverables.\n\n"
        "Quick start: `toolagent demo` seeds the demo Supabase agent and runs its BUILD on the embedded "
        "demo database. Exit codes: 0 ok, 1 failed, 2 usage or configuration error."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class Globals:
    """Options given before the command."""

    db: str | None = None
    json: bool = False
    debug: bool = False
    servers: str | None = None
    user: str | None = None


state = Globals()


@app.callback()
def _global_options(
    db: str | None = typer.Option(
        None, "--db", envvar="TOOLAGENT_DATABASE_URL", show_envvar=True,
        help="Store URL: sqlite+aiosqlite:///PATH or postgresql://USER@HOST/DB. Default: ./.toolagent/toolagent.db",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    servers: str | None = typer.Option(
        None, "--servers", envvar="TOOLAGENT_MCP_CONFIG", show_envvar=True,
        help="MCP server config (mcpServers JSON). Default: ./mcp.json",
    ),
    user: str | None = typer.Option(
        None, "--user", envvar="TOOLAGENT_USER", show_envvar=True, help="Act as this user (default: the local user).",
    ),
) -> None:
    state.db, state.json, state.debug, state.servers, state.user = db, as_json, debug, servers, user
    from ..engine.logs import LOG_LEVEL_ENV, configure_logging

    # TOOLAGENT_LOG_FORMAT=json and TOOLAGENT_LOG_LEVEL turn on structured logs on stderr. The
    # commands report denials and failures themselves, so the engine's lifecycle lines would say
    # it twice: they come when asked for with a level (or --debug), with their execution's context.
    try:
        configure_logging(level="DEBUG" if debug else None, lifecycle=debug or bool(os.environ.get(LOG_LEVEL_ENV)))
    except ToolAgentError as exc:
        fail(exc.message, exc.exit_code)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body, mapping toolagent errors to one line and an exit code."""
    try:
        return anyio.run(fn)
    except ToolAgentError as exc:
        if state.debug:
            raise
        fail(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Print an error line (or JSON with --json) and exit."""
    if state.json:
        print(json.dumps({"error": message, "exit_code": code}), file=sys.stderr)
    else:
        lines = message.splitlines() or [""]
        err.print(f"[bold red]error:[/] {lines[0]}", markup=True)
        for line in lines[1:]:
            err.print(f"  {line}", markup=False)
    raise typer.Exit(code)


def emit_json(data: Any) -> None:
    """Print JSON to stdout."""
    print(json.dumps(data, indent=2, default=str))


def read_json_arg(value: str | None, what: str) -> Any:
    """Parse a JSON option value, or `@file` holding JSON, naming the option on error."""
    if value is None:
        return None
    text: str | bytes = value
    if value.startswith("@"):
        try:
            text = Path(value[1:]).read_bytes()
        except OSError as exc:
            fail(f"{what}: cannot read {value[1:]}: {exc.strerror}", EXIT_USAGE)
    try:
        # The same checks as the HTTP API's: a NUL, a lone surrogate, NaN or a 10-level-deep bomb
        # is refused here, naming where it is, rather than failing later in a store or a tool.
        return parse_json(text, what)
    except InputProblem as exc:
        source = f" (in {value[1:]})" if value.startswith("@") else ""
        fail(f"{exc.field} {exc.message}{source}; pass JSON or @file.json", EXIT_USAGE)


def is_tty() -> bool:
    """Live progress only on a terminal."""
    return out.is_terminal and not state.json and os.environ.get("TERM") != "dumb"
