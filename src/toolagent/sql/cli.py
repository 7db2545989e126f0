"""`toolagent sql check`: run the SQL guard from the command line.

Prints the decision as JSON and exits 0 when the statement is allowed, 1 when it is
rejected and 2 for a usage problem (bad option value, unknown dialect, unreadable file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from .guard import SqlGuard
from .policy import DEFAULT_MAX_BYTES, SqlPolicy

#: Exit codes of `toolagent sql check`.
EXIT_ALLOW, EXIT_REJECT, EXIT_USAGE = 0, 1, 2

sql_app = typer.Typer(
    help="Check SQL statements against the guard (single read query, allowed tables and functions).",
    no_args_is_help=True,
)


@sql_app.callback()
def _group() -> None:
    """Check SQL statements against the guard."""
    # A callback keeps `check` a subcommand even while it is the only one.


def _usage_error(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _split_list(value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def _read_sql(source: str) -> str:
    """The SQL text: `-` reads stdin, `@path` reads a UTF-8 file, anything else is the SQL."""
    if source == "-":
        return sys.stdin.read()
    if source.startswith("@"):
        path = Path(source[1:])
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _usage_error(f"cannot read SQL file {str(path)!r}: {exc}") from exc
    return source


@sql_app.command("check")
def check(
    sql: str = typer.Argument(..., help="The SQL text, '-' to read stdin, or '@FILE' to read a file."),
    allowed_tables: str | None = typer.Option(
        None, "--allowed-tables", help="Comma-separated table allowlist (PostgreSQL identifier rules)."
    ),
    deny: str | None = typer.Option(
        None,
        "--deny",
        help="Comma-separated denied operations; replaces the defaults (DROP,TRUNCATE,ALTER,DELETE,UPDATE).",
    ),
    dialect: str = typer.Option("postgres", "--dialect", help="sqlglot dialect used to parse."),
    max_bytes: int = typer.Option(DEFAULT_MAX_BYTES, "--max-bytes", help="Largest accepted SQL size in UTF-8 bytes."),
) -> None:
    """Check one SQL statement and print the decision as JSON (exit 0 allow, 1 reject, 2 usage)."""
    if max_bytes <= 0:
        raise _usage_error(f"--max-bytes must be a positive integer, got {max_bytes}")
    try:
        policy = SqlPolicy.from_security(
            _split_list(deny),
            _split_list(allowed_tables),
            dialect=dialect,
            max_bytes=max_bytes,
        )
    except ValueError as exc:
        raise _usage_error(str(exc)) from exc
    decision = SqlGuard(policy).check(_read_sql(sql))
    typer.echo(json.dumps(decision.to_dict()))
    raise typer.Exit(EXIT_ALLOW if decision.allowed else EXIT_REJECT)
