"""The store: agents, organizations, runs, steps and deliverables on SQLite or PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from .agents import AgentStore, UpsertOutcome
from .db import DATABASE_URL_ENV, Database, default_url, normalize_url
from .orgs import OrgRows
from .queue import QueueStore
from .runs import DeliverableRow, RunRow, RunStore, StepRow

logger = logging.getLogger(__name__)


class Store:
    """One database and the verbs over it, grouped by concern."""

    def __init__(self, url: str | None = None) -> None:
        self.db = Database(url)
        self.agents = AgentStore(self.db)
        self.orgs = OrgRows(self.db)
        self.runs = RunStore(self.db)
        self.queue = QueueStore(self.db)

    @property
    def url(self) -> str:
        """The normalized SQLAlchemy URL."""
        return self.db.url

    async def close(self) -> None:
        """Release connections."""
        await self.db.dispose()


@contextlib.asynccontextmanager
async def open_store(url: str | None = None) -> AsyncIterator[Store]:
    """Open the store at `url` (default: `TOOLAGENT_DATABASE_URL` or the embedded SQLite file),
    migrated, with the runs left `running` by processes that have ended closed as interrupted."""
    store = Store(url)
    try:
        await store.db.migrate()
        closed = await store.runs.close_interrupted()
        if closed:
            logger.warning("closed %d runs whose process had ended: %s", len(closed), ", ".join(closed))
        yield store
    finally:
        await store.close()


__all__ = [
    "DATABASE_URL_ENV",
    "AgentStore",
    "Database",
    "DeliverableRow",
    "RunRow",
    "RunStore",
    "StepRow",
    "Store",
    "UpsertOutcome",
    "default_url",
    "normalize_url",
    "open_store",
]
