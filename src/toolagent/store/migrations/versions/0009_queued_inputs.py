"""queued_inputs: what a worker needs of a submitted run or call, unredacted, until it ends

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    # The rows people read (runs, executions, jobs) hold the redacted form only; the raw values a
    # worker runs with live here, one row per queued run or call, deleted when it ends.
    op.create_table(
        "queued_inputs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("data", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("queued_inputs")
