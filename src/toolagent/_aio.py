"""Async helpers shared across packages."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import anyio
import anyio.abc


@contextlib.asynccontextmanager
async def task_group() -> AsyncIterator[anyio.abc.TaskGroup]:
    """An anyio task group that re-raises a lone error as itself.

    anyio wraps every error leaving a task group, even a single one from the body, in an
    exception group; callers here map toolagent's error classes to exit codes and HTTP statuses,
    so one error must stay that error.
    """
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def others_ready() -> bool:
    """Whether the event loop has other callbacks ready to run in its next turn (a task just
    started, one whose I/O or timer came due); True when that cannot be told.

    It reads the ready queue of asyncio's own loop, which has no public accessor; another loop
    (uvloop) or backend answers True, so a caller that would skip a turn only when nothing else
    is ready keeps taking it there.
    """
    try:
        ready = getattr(asyncio.get_running_loop(), "_ready", None)
    except RuntimeError:
        return True
    return True if ready is None else bool(ready)
