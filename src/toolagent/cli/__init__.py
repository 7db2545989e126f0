"""The `toolagent` command line: a thin caller of the library.

Each command's module is imported when that command runs (see `COMMANDS` in `_app`), so a
command that needs neither the MCP SDK nor the store starts without loading them.
"""

from __future__ import annotations

import gc

from ._app import app


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    finally:
        # The interpreter's exit collects every object it still tracks: after a command that
        # loaded the MCP SDK, pydantic's models and SQLAlchemy, that pass cost a few hundred
        # milliseconds between the command's last line and the prompt (bench/timeout_exit.py).
        # Nothing is left to run that needs those objects freed, so they are left to the OS.
        gc.freeze()


__all__ = ["app", "main"]
