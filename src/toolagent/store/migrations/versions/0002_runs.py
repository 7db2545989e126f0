"""runs, steps and deliverables

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    # `runs` before revision 0005 added the owner columns.
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("organization_slug", sa.String(200)),
        sa.Column("agent_slug", sa.String(200), nullable=False),
        sa.Column("agent_version", sa.String(50)),
        sa.Column("user_id", sa.String(200)),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("execution_mode", sa.String(20), nullable=False),
        sa.Column("stop_on_error", sa.Boolean, nullable=False),
        sa.Column("payload", JSON),
        sa.Column("overrides", JSON),
        sa.Column("error", sa.Text),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("ended_at", TS),
        sa.Column("duration_ms", sa.Float),
        sa.Column("deliverable_id", sa.String(64)),
        sa.Index("ix_runs_agent", "organization_slug", "agent_slug", "started_at"),
        sa.Index("ix_runs_started", "started_at"),
    )
    op.create_table(
        "run_steps",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("tool", sa.String(300), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("params", JSON),
        sa.Column("param_sources", JSON),
        sa.Column("result", JSON),
        sa.Column("error", sa.Text),
        sa.Column("started_at", TS),
        sa.Column("ended_at", TS),
        sa.Column("duration_ms", sa.Float),
    )
    op.create_table(
        "deliverables",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False,
                  unique=True),
        sa.Column("format", sa.String(20), nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("metadata", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("deliverables")
    op.drop_table("run_steps")
    op.drop_table("runs")
