"""The `toolagent` command line: a thin caller of the library."""

from __future__ import annotations

from . import agents, runs, serve, tools  # noqa: F401  (registers commands)
from . import engine  # noqa: F401
from . import audit  # noqa: F401
from . import worker  # noqa: F401
from ..sql.cli import sql_app
from ._app import app

app.add_typer(sql_app, name="sql", help="Check SQL with the guard the runner and the Supabase server use.")


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
