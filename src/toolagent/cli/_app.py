"""The typer application, global options, output helpers and the error -> exit code mapping."""

from __future__ import annotations

import copy
import difflib
import importlib
import json
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
import typer.main
from rich.console import Console
from typer.core import TyperCommand, TyperGroup, TyperOption

from ..errors import ToolAgentError
from ..inputs import InputProblem, parse_json

T = TypeVar("T")

#: Exit codes scripts can trust.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: `serve` could not listen on its address (in use, or not permitted).
EXIT_NO_LISTEN = 3

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

#: Every top-level command: the module that defines it and its one-line help. Only the module of
#: the command being run is imported, so `toolagent --help`, `sql check` or `agents validate` never
#: load the MCP SDK or SQLAlchemy. tests/unit/test_cli_app.py checks this table against the modules.
COMMANDS: dict[str, tuple[str, str]] = {
    "seed": ("agents", "Upsert seed agent records by (organization, slug); running it twice changes nothing."),
    "build": ("runs", "Run an agent's BUILD: call its tools over MCP and store a deliverable."),
    "demo": ("runs", "Seed demo/supabase-agent and run its BUILD on the embedded demo database (no network needed)."),
    "serve": (
        "serve",
        "Serve the HTTP API (OpenAPI at /openapi.json, docs at /docs) with the CLI's store and servers.",
    ),
    "history": ("engine", "Your tool executions, newest first, with statistics over everything the filters match."),
    "metrics": (
        "engine",
        "Tool metrics from the store: per tool, per user, per category, most used, denials, running.",
    ),
    "agents": ("agents", "Validate, list, show, store and export agent definitions."),
    "tools": ("tools", "List, inspect and call the tools of the configured MCP servers."),
    "runs": ("runs", "Inspect and cancel BUILD runs."),
    "deliverables": ("runs", "Inspect deliverables."),
    "users": ("principals", "Users: permission level and plan."),
    "keys": ("principals", "API keys: create (shown once), list, revoke."),
    "orgs": ("orgs", "Organizations: list them and their members, grant and revoke roles."),
    "executions": ("engine", "Tool executions: running ones, one in full, cancel, prune."),
    "audit": ("audit", "Verify, export and list the audit log."),
    "sql": ("sql", "Check SQL with the guard the runner and the Supabase server use."),
    "supabase": ("supabase", "Install the SQL functions the Supabase server calls over HTTPS, or print them."),
    "gateway": (
        "gateway",
        "Serve the governed tools to an MCP client over stdio, or print their gateway names.",
    ),
    "info": (
        "info",
        "The version, the store, the server and engine configs and the user in use, and where each came from.",
    ),
    "worker": (
        "worker",
        "Run submitted BUILD runs and async tool calls until SIGTERM (needs a PostgreSQL store and the workers extra).",
    ),
    "queue": ("worker", "Jobs per queue and status, the live workers, and the newest jobs (PostgreSQL)."),
}

GLOBAL_PANEL = "Global options (also accepted after the command)"


def _show_no_type_for_flags() -> None:
    # Typer labels every option with its Python type; for an on/off flag `<bool>` reads as if it
    # took a value, so flags show none.
    original = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        if self.is_flag and self.metavar is None:
            return None
        return original(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]  # a deliberate patch of typer


_show_no_type_for_flags()


def _set_global(ctx: Any, param: Any, value: Any) -> Any:
    """Callback of a global option given after a command: it wins over the one given before."""
    if value is None or value is False or value == () or value == []:
        return value  # not given after the command (a many-valued option's absence is empty)
    name = param.name.removeprefix("global_")
    if name == "servers":
        value = _joined_servers(value)
    setattr(state, "json" if name == "as_json" else name, value)
    state.sources[name] = "flag"
    return value


def _joined_servers(files: Any) -> str | None:
    """`--servers` given once or more, as one `os.pathsep`-separated list (what the variable holds)."""
    import os

    if not files:
        return None
    return files if isinstance(files, str) else os.pathsep.join(files)


def add_global_options(command: Any, globals_: list[Any]) -> None:
    """Give `command` (and, for a group, every command under it) the root's options, so
    `toolagent build X --json --user bob` works like `toolagent --json --user bob build X`.
    A command's own option of the same name (`keys create --user`) keeps its meaning."""
    taken = {name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    for option in globals_:
        if taken.isdisjoint(option.opts):
            extra = copy.copy(option)
            extra.name = f"global_{option.name}"
            extra.expose_value, extra.callback, extra.envvar = False, _set_global, None
            extra.rich_help_panel = GLOBAL_PANEL
            command.params.append(extra)
    for sub in getattr(command, "commands", {}).values():
        add_global_options(sub, globals_)


class RootGroup(TyperGroup):
    """The `toolagent` command: loads a command's module on first use and lets every command take
    the global options too."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for option in self.params:
            if isinstance(option, TyperOption) and option.name != "help":
                option.rich_help_panel = GLOBAL_PANEL
        for command in self.commands.values():
            add_global_options(command, self._globals())
        self._listing = False
        self._remote = False

    def _globals(self) -> list[Any]:
        return [p for p in self.params if isinstance(p, TyperOption)]

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in self.commands if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._remote and not self._listing:
            # Loaded as the command modules are: it builds on this module.
            remote = importlib.import_module(f"{__package__}.remote").remote_command(ctx, cmd_name, self._globals())
            if remote is not None:
                return remote
        command = self.commands.get(cmd_name)
        if command is not None or cmd_name not in COMMANDS:
            return command
        module, short_help = COMMANDS[cmd_name]
        if self._listing:
            # The root's help lists commands by their one line; importing every module for it
            # would cost the second of start-up this table exists to avoid.
            return TyperCommand(name=cmd_name, help=short_help)
        importlib.import_module(f"{__package__}.{module}")
        self._convert_registered()
        return self.commands.get(cmd_name)

    def _convert_registered(self) -> None:
        """Turn commands that modules registered on `app` since start-up into click commands."""
        for info in app.registered_commands:
            name = info.name or typer.main.get_command_name(info.callback.__name__)  # type: ignore[union-attr]  # @app.command() always sets it
            if name not in self.commands:
                command = typer.main.get_command_from_info(
                    info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
                )
                add_global_options(command, self._globals())
                self.commands[name] = command
        for group_info in app.registered_groups:
            if group_info.name and group_info.name not in self.commands:
                group = typer.main.get_group_from_info(
                    group_info,
                    pretty_exceptions_short=app.pretty_exceptions_short,
                    rich_markup_mode=app.rich_markup_mode,
                    suggest_commands=app.suggest_commands,
                )
                add_global_options(group, self._globals())
                self.commands[group_info.name] = group

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS and name not in self.commands:
            # Match a typo against every command, not only the ones loaded so far.
            matches = difflib.get_close_matches(name, list(COMMANDS))
            hint = f" Did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
            ctx.fail(f"No such command {name!r}.{hint}")
        # `--api` (or TOOLAGENT_API_URL) sends the command to a running `toolagent serve`; given
        # after the command, it is only in the arguments yet.
        self._remote = bool(ctx.params.get("api")) or any(a == "--api" or a.startswith("--api=") for a in args)
        return super().resolve_command(ctx, args)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="toolagent",
    cls=RootGroup,
    help=(
        "Run tool agents: namespaced MCP tool chains with validation, permissions and deliverables.\n\n"
        "Quick start: `toolagent demo` seeds the demo Supabase agent and runs its BUILD on the embedded "
        "demo database. The global options may come before or after the command. Exit codes: 0 ok, "
        "1 failed, 2 usage or configuration error, 3 `serve`'s address is in use."
    ),
    no_args_is_help=True,
    # Markdown joins a docstring's lines into sentences that wrap at the terminal's width.
    rich_markup_mode="markdown",
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
    api: str | None = None
    """`--api` / `TOOLAGENT_API_URL`: the running `toolagent serve` the command is sent to."""
    logging_ready: bool = False
    """Logging is set up (by the first `run`, or by a command that sets up its own)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where `db`, `servers` and `user` came from: `flag` or `environment` (absent: not given)."""


state = Globals()


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"toolagent {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _global_options(
    ctx: typer.Context,
    db: str | None = typer.Option(
        None,
        "--db",
        envvar="TOOLAGENT_DATABASE_URL",
        show_envvar=True,
        metavar="URL|FILE",
        help="The store: a file path (./x.db), sqlite+aiosqlite:///PATH or postgresql://USER@HOST/DB. In a "
        "sqlite URL, three slashes and a relative path (sqlite:///x.db) is relative to the working directory; "
        "four slashes (sqlite:////var/x.db) is absolute. Default: toolagent.db in your data directory "
        "($XDG_DATA_HOME/toolagent, else ~/.local/share/toolagent), or ./.toolagent/toolagent.db where one exists. "
        "`toolagent info` shows which.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors, and debug logs."),
    servers: list[str] | None = typer.Option(
        None,
        "--servers",
        envvar="TOOLAGENT_MCP_CONFIG",
        show_envvar=True,
        metavar="FILE",
        help="The MCP server config (an mcpServers JSON file); given more than once, the files' servers are "
        "merged (the variable takes several separated by ':'). Default: ./mcp.json, else the config "
        "shipped with toolagent.",
    ),
    user: str | None = typer.Option(
        None,
        "--user",
        envvar="TOOLAGENT_USER",
        show_envvar=True,
        metavar="NAME",
        help="Act as this user. Default: the local user.",
    ),
    api: str | None = typer.Option(
        None,
        "--api",
        envvar="TOOLAGENT_API_URL",
        show_envvar=True,
        metavar="URL",
        help="Send the command to a running `toolagent serve` at URL (e.g. http://127.0.0.1:8080), with the API "
        "key in TOOLAGENT_API_KEY, instead of opening the store and starting the servers here: the servers stay "
        "warm between commands. For tools list/show/call, build, runs list/show and agents list/show.",
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    state.db, state.json, state.debug, state.user, state.api = db, as_json, debug, user, api
    state.servers = _joined_servers(servers)
    state.logging_ready = False
    state.sources = {}
    for name in ("db", "servers", "user", "api"):
        # By name: typer carries its own copy of click, whose `ParameterSource` this is.
        source = getattr(ctx.get_parameter_source(name), "name", None)
        if source == "COMMANDLINE":
            state.sources[name] = "flag"
        elif source == "ENVIRONMENT":
            state.sources[name] = "environment"
    if state.sources.get("servers") == "environment":
        # click splits a many-valued option's variable at whitespace; the variable's own
        # separator is the path list's (`os.pathsep`), which `ServersConfig.load` splits at.
        from ..settings import Settings

        state.servers = Settings.from_env().mcp_config


def _configure_logging() -> None:
    # Only commands that open a store or a server log anything (they all go through `run`), so
    # the logging set-up (and pydantic-settings with it) is not paid by `agents validate`,
    # `sql check` or `--help`.
    if state.logging_ready:  # `serve` and `worker` set up their own, louder, logging
        return
    from ..engine.logs import configure_logging
    from ..settings import Settings

    # TOOLAGENT_LOG_FORMAT=json and TOOLAGENT_LOG_LEVEL turn on structured logs on stderr. The
    # commands report denials and failures themselves, so the engine's lifecycle lines would say
    # it twice: they come when asked for with a level (or --debug), with their execution's context.
    try:
        configure_logging(
            level="DEBUG" if state.debug else None, lifecycle=state.debug or bool(Settings.from_env().log_level)
        )
        state.logging_ready = True
    except ToolAgentError as exc:
        fail(exc.message, exc.exit_code)


def run(fn: Callable[[], Awaitable[T]]) -> T:
    """Run an async command body, mapping toolagent errors to one line and an exit code."""
    import anyio

    _configure_logging()
    _note_working_directory_store()

    try:
        return anyio.run(fn)
    except ToolAgentError as exc:
        if state.debug:
            raise
        fail(_naming_the_store(exc), exc.exit_code)
    except KeyboardInterrupt:
        fail("interrupted", 130)


def store_in_use() -> tuple[str, str]:
    """The store this command opens, as it may be printed (password masked), and where it came
    from: `--db`, `TOOLAGENT_DATABASE_URL`, `./.toolagent/` in the working directory, or the
    per-user default."""
    from ..store.db import default_store, shown_url

    if state.db:
        origin = "--db" if state.sources.get("db") == "flag" else "TOOLAGENT_DATABASE_URL"
        return shown_url(state.db), origin
    choice = default_store()
    origin = {
        "environment": "TOOLAGENT_DATABASE_URL",
        "working directory": "an existing ./.toolagent/ in the working directory",
        "user default": "the per-user default",
    }[choice.origin]
    return shown_url(choice.url), origin


def _note_working_directory_store() -> None:
    # The default store moved from the working directory to the user's data directory; one left
    # in a working directory is still used, and said so, so that two stores never hide each other.
    if state.db is None and Path(".toolagent", "toolagent.db").is_file() and not state.json:
        url, _ = store_in_use()
        err.print(f"note: using the store in this working directory ({url}); pass --db to use another", markup=False)


def _naming_the_store(exc: ToolAgentError) -> str:
    """A not-found message with the store it was looked up in, so a wrong store shows at once."""
    from ..errors import NotFound

    if not isinstance(exc, NotFound) or exc.message.startswith("tool "):
        return exc.message
    url, origin = store_in_use()
    return f"{exc.message}\n(looked up in the store {url}, from {origin}; `toolagent info` shows the configuration)"


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
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
    from ..settings import environ as settings_environ

    return out.is_terminal and not state.json and settings_environ().get("TERM") != "dumb"
