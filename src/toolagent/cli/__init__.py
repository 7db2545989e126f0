"""The `toolagent` command line: a thin caller of the library.

Each command's module is imported when that command runs (see `COMMANDS` in `_app`), so a
command that needs neither the MCP SDK nor the store starts without loading them.
"""

from __future__ import annotations

from ._app import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
