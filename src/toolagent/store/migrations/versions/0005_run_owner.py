"""runs: owner process

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # The process running a run: one whose process is gone is closed as interrupted.
    op.add_column("runs", sa.Column("owner_pid", sa.Integer))
    op.add_column("runs", sa.Column("owner_host", sa.String(255)))
    op.add_column("runs", sa.Column("owner_boot", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name in ("owner_boot", "owner_host", "owner_pid"):
            batch.drop_column(name)
