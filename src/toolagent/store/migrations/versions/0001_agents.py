"""agents

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Column types as this revision shipped them: never import today's tables into a revision.
JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("organization_slug", sa.String(200), nullable=False),
        sa.Column("slug", sa.String(200), nullable=False),
        sa.Column("display_name", sa.Text, nullable=False),
        sa.Column("agent_type", sa.String(100), nullable=False),
        sa.Column("mode_profile", sa.String(100), nullable=False),
        sa.Column("status", sa.String(50), nullable=False),
        sa.Column("yaml", sa.Text, nullable=False),
        sa.Column("description", sa.Text),
        sa.Column("context", JSON),
        sa.Column("plan_structure", JSON),
        sa.Column("deliverable_structure", JSON),
        sa.Column("io_schema", JSON),
        sa.Column("config", JSON),
        sa.Column("version", sa.String(50)),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("organization_slug", "slug", name="uq_agents_org_slug"),
    )


def downgrade() -> None:
    op.drop_table("agents")
