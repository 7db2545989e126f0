"""runs: queued runs for workers

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)

_COLUMNS = ("plan", "principal", "api_key_id", "run_metadata", "queued_at", "job_id", "worker", "worker_host")


def upgrade() -> None:
    # A run submitted to the workers is stored `queued` with everything a worker needs to run it
    # as its caller (the plan, the principal and key it runs as), then claimed by one worker.
    op.add_column("runs", sa.Column("plan", JSON))
    op.add_column("runs", sa.Column("principal", sa.String(200)))
    op.add_column("runs", sa.Column("api_key_id", sa.String(64)))
    op.add_column("runs", sa.Column("run_metadata", JSON))
    op.add_column("runs", sa.Column("queued_at", TS))
    op.add_column("runs", sa.Column("job_id", sa.BigInteger))
    op.add_column("runs", sa.Column("worker", sa.String(100)))
    op.add_column("runs", sa.Column("worker_host", sa.String(255)))
    op.create_index("ix_runs_status", "runs", ["status"])


def downgrade() -> None:
    op.drop_index("ix_runs_status", "runs")
    with op.batch_alter_table("runs") as batch:
        for name in reversed(_COLUMNS):
            batch.drop_column(name)
