"""audit log

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=False),
        sa.Column("recorded_at", TS, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("principal", sa.Text),
        sa.Column("api_key_id", sa.Text),
        sa.Column("tool", sa.Text),
        sa.Column("risk", sa.Text),
        sa.Column("level", sa.Text),
        sa.Column("decision", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("arguments", sa.Text),
        sa.Column("outcome", sa.Text),
        sa.Column("started_at", TS),
        sa.Column("ended_at", TS),
        sa.Column("duration_ms", sa.Float),
        sa.Column("run_id", sa.Text),
        sa.Column("execution_id", sa.Text),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Index("ix_audit_log_recorded_at", "recorded_at"),
        sa.Index("ix_audit_log_execution", "execution_id"),
        sa.Index("ix_audit_log_principal", "principal", "seq"),
    )
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("seq", SEQ, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.CheckConstraint("id = 1", name="ck_audit_head_single_row"),
    )


def downgrade() -> None:
    op.drop_table("audit_head")
    op.drop_table("audit_log")
