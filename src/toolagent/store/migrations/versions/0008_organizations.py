"""organizations and their members

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    organizations = op.create_table(
        "organizations",
        sa.Column("slug", sa.String(200), primary_key=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("created_by", sa.String(200)),
    )
    op.create_table(
        "org_members",
        sa.Column("org_slug", sa.String(200), sa.ForeignKey("organizations.slug", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("user_name", sa.String(200), sa.ForeignKey("users.name", ondelete="CASCADE"), primary_key=True),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("granted_at", TS, nullable=False),
        sa.Column("granted_by", sa.String(200)),
        sa.Index("ix_org_members_user", "user_name"),
    )
    # Every organization that already has agents exists, with no members: until an operator grants
    # roles (`toolagent orgs grant`), only global admins change its agents, the safest reading of a
    # store in which anyone could change any agent.
    agents = sa.table("agents", sa.column("organization_slug", sa.String(200)))
    orgs = [r[0] for r in op.get_bind().execute(sa.select(agents.c.organization_slug).distinct())]
    if orgs:
        now = datetime.now(UTC)
        op.bulk_insert(organizations, [{"slug": org, "created_at": now, "created_by": None} for org in sorted(orgs)])


def downgrade() -> None:
    op.drop_table("org_members")
    op.drop_table("organizations")
