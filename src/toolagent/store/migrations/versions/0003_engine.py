"""engine: principals, keys, executions, limits

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)
BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("name", sa.String(200), primary_key=True),
        sa.Column("level", sa.String(20), nullable=False),
        sa.Column("plan", sa.String(20), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_name", sa.String(200), sa.ForeignKey("users.name", ondelete="CASCADE"), nullable=False),
        sa.Column("label", sa.String(200)),
        sa.Column("prefix", sa.String(20), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("scopes", JSON, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("revoked_at", TS),
        sa.Index("ix_api_keys_user", "user_name"),
    )
    op.create_table(
        "executions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("tool", sa.String(300), nullable=False),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("risk", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("denied", sa.Boolean, nullable=False),
        sa.Column("denial", sa.String(40)),
        sa.Column("user_name", sa.String(200), nullable=False),
        sa.Column("level", sa.String(20)),
        sa.Column("api_key_id", sa.String(40)),
        sa.Column("session_id", sa.String(200)),
        sa.Column("run_id", sa.String(64)),
        sa.Column("metadata", JSON),
        sa.Column("arguments", JSON),
        sa.Column("timeout_ms", sa.Integer),
        sa.Column("started_at", TS, nullable=False),
        sa.Column("ended_at", TS),
        sa.Column("duration_ms", sa.Float),
        sa.Column("result", JSON),
        sa.Column("error", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("owner_pid", sa.Integer),
        sa.Column("owner_host", sa.String(255)),
        sa.Column("owner_boot", sa.String(64)),
        sa.Column("cancel_requested_by", sa.String(200)),
        sa.Column("cancel_requested_at", TS),
        sa.Index("ix_executions_user_started", "user_name", "started_at", "id"),
        sa.Index("ix_executions_user_tool", "user_name", "tool", "started_at", "id"),
        sa.Index("ix_executions_user_category", "user_name", "category", "started_at", "id"),
        sa.Index("ix_executions_user_status", "user_name", "status", "started_at", "id"),
        sa.Index("ix_executions_started", "started_at", "id"),
        sa.Index("ix_executions_tool", "tool", "started_at", "id"),
        sa.Index("ix_executions_category", "category", "started_at", "id"),
        sa.Index("ix_executions_status", "status", "started_at", "id"),
        sa.Index("ix_executions_run", "run_id"),
        sa.Index("ix_executions_tool_duration", "tool", "duration_ms"),
    )
    op.create_table(
        "execution_totals",
        sa.Column("tool", sa.String(300), primary_key=True),
        sa.Column("user_name", sa.String(200), primary_key=True),
        sa.Column("status", sa.String(20), primary_key=True),
        sa.Column("denial", sa.String(40), primary_key=True),
        sa.Column("category", sa.String(20), nullable=False),
        sa.Column("calls", BIGINT, nullable=False),
        sa.Column("timed", BIGINT, nullable=False),
        sa.Column("duration_sum_ms", sa.Float, nullable=False),
        sa.Column("last_started_at", TS),
    )
    op.create_table(
        "execution_buckets",
        sa.Column("tool", sa.String(300), primary_key=True),
        sa.Column("bucket", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("calls", BIGINT, nullable=False),
    )
    op.create_table(
        "limit_counters",
        sa.Column("key", sa.String(600), primary_key=True),
        sa.Column("window_no", BIGINT, nullable=False),
        sa.Column("calls", BIGINT, nullable=False),
    )
    op.create_table(
        "run_cancellations",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("requested_by", sa.String(200), nullable=False),
        sa.Column("requested_at", TS, nullable=False),
    )


def downgrade() -> None:
    for name in ("run_cancellations", "limit_counters", "execution_buckets", "execution_totals", "executions",
                 "api_keys", "users"):
        op.drop_table(name)
