"""`--api` commands take exactly the options of their local commands, so a user can switch by
adding or dropping `--api` (or `TOOLAGENT_API_URL`) and nothing else."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import typer.main

from toolagent.cli._app import COMMANDS, app
from toolagent.cli.remote import REMOTE, remote_app


def _local(path: tuple[str, ...]) -> Any:
    importlib.import_module(f"toolagent.cli.{COMMANDS[path[0]][0]}")
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name] if name in command.commands else command.get_command(None, name)
    return command  # type: ignore[no-any-return]


def _remote(path: tuple[str, ...]) -> Any:
    command: Any = typer.main.get_command(remote_app)
    for name in path:
        command = command.commands[name]
    return command  # type: ignore[no-any-return]


def _shape(command: Any) -> list[tuple[Any, ...]]:
    """What a user can pass: each parameter's name, flags, type, default, arity and help."""
    return [
        (
            p.name,
            tuple(p.opts),
            tuple(p.secondary_opts),
            repr(getattr(getattr(p, "type_descriptor", None), "annotation", None)),
            getattr(p, "min", None),
            getattr(p, "max", None),
            p.default,
            p.multiple,
            p.required,
            getattr(p, "is_flag", False),
            getattr(p, "help", None),
        )
        for p in command.params
        if not str(p.name).startswith("global_")  # the root's options, added to every command alike
    ]


PATHS = [
    (group, sub) if subs is not None else (group,)
    for group, subs in REMOTE.items()
    for sub in (sorted(subs) if subs is not None else [None])
]


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_remote_command_takes_the_local_options(path: tuple[str, ...]) -> None:
    assert _shape(_remote(path)) == _shape(_local(path))


def test_every_remote_command_is_listed() -> None:
    built: Any = typer.main.get_command(remote_app)
    listed = {
        name: frozenset(cmd.commands) if hasattr(cmd, "commands") else None for name, cmd in built.commands.items()
    }
    assert listed == REMOTE
