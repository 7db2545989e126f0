"""The runtime a store-only command acts through: the store given by `--db`, the engine settings,
no MCP servers (imported only by the commands that need it, so others start without the store)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from ..engine import EngineConfig
from ..runtime import Runtime
from ..store import open_store
from ._app import state


@contextlib.asynccontextmanager
async def open_engine() -> AsyncIterator[Runtime]:
    """A `Runtime` over the command's store, closed (with the store) on exit."""
    from ..settings import Settings

    settings = Settings.from_env()  # this command's, read once
    async with open_store(state.db) as store, Runtime(store, config=EngineConfig.load(), settings=settings) as engine:
        yield engine


__all__ = ["open_engine"]
