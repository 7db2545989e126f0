"""`toolagent sql`: the SQL guard's command group, defined next to the guard."""

from __future__ import annotations

from ..sql.cli import sql_app
from ._app import COMMANDS, app

app.add_typer(sql_app, name="sql", help=COMMANDS["sql"][1])
