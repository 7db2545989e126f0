"""procrastinate's job queue (PostgreSQL only)

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: procrastinate 3.10's schema, frozen beside this revision: the queue's tables and functions are
#: part of the store's history like any other, and applying them needs no procrastinate install.
#: A later procrastinate release that changes its schema comes with a new revision applying its
#: own migration files.
SCHEMA = Path(__file__).with_name("0007_procrastinate_3_10.sql")


def upgrade() -> None:
    # Workers exist on PostgreSQL only; SQLite stores keep running everything in process.
    if op.get_bind().dialect.name != "postgresql":
        return
    # Handed to the driver's cursor as one script with no parameters at all, so its `%` (plpgsql's
    # RAISE placeholders) are not read as bind markers.
    cursor = op.get_bind().connection.dbapi_connection.cursor()  # type: ignore[union-attr]  # None only once the connection is closed
    try:
        cursor.execute(SCHEMA.read_text(encoding="utf-8"))
    finally:
        cursor.close()


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "DROP TABLE IF EXISTS procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, "
        "procrastinate_workers CASCADE"
    )
    op.execute(
        "DROP TYPE IF EXISTS procrastinate_job_to_defer_v1, procrastinate_job_event_type, "
        "procrastinate_job_status CASCADE"
    )
