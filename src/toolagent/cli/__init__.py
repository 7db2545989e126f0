"""The `toolagent` command line: a thin caller of the library."""

from __future__ import annotations

from . import agents, runs, serve  # noqa: F401  (registers commands)
from ._app import app


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
