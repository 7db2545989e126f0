"""principal_epoch: a counter bumped by every change that can narrow what a key may do

Revision ID: 0010
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # One row (id 1), written on first use: processes caching API keys compare its epoch with the
    # one they cached under, so a revocation or a level change in one process reaches the others.
    op.create_table(
        "principal_epoch",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("principal_epoch")
