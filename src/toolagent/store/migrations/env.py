"""Alembic's environment: migrations run on the connection `toolagent.store.migrations.upgrade`
passes in, inside the caller's transaction (which holds the migration lock on PostgreSQL)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "toolagent migrations run through the store: open it with `toolagent` (any command) or "
        "`await Database(url).migrate()`; the alembic command line is not wired to a URL"
    )

context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
