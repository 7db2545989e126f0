"""partial_history_indexes: the history indexes of `executions` hold ended executions only

Revision ID: 0011
Revises: 0010

A call's admission wrote its `running` row into all ten indexes of `executions`, and its final
write moved it in three of them. Now the seven history indexes, `ix_executions_tool_duration`
and `ix_executions_run` hold only the rows they serve (ended executions; executions with a
duration; BUILD steps): the admission writes two or three index entries, and the final write
adds the row to the history indexes once. Executions in flight are read through
`ix_executions_status`, which stays whole (`store/engine_tables.py`, `store/history.py`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# Written out rather than imported: a migration keeps the schema of its own time.
_ENDED = sa.text("status NOT IN ('queued', 'running')")
_TIMED = sa.text("duration_ms IS NOT NULL")
_IN_A_RUN = sa.text("run_id IS NOT NULL")
#: Each history index's columns before this revision; it adds `status` at the end where missing
#: (SQLite then checks a read's `_ENDED` on the index entry, not on the row).
_HISTORY = {
    "ix_executions_user_started": ("user_name", "started_at", "id"),
    "ix_executions_user_tool": ("user_name", "tool", "started_at", "id"),
    "ix_executions_user_category": ("user_name", "category", "started_at", "id"),
    "ix_executions_user_status": ("user_name", "status", "started_at", "id"),
    "ix_executions_started": ("started_at", "id"),
    "ix_executions_tool": ("tool", "started_at", "id"),
    "ix_executions_category": ("category", "started_at", "id"),
}


def upgrade() -> None:
    for name, columns in _HISTORY.items():
        op.drop_index(name, table_name="executions")
        op.create_index(name, "executions", [*columns, *(() if "status" in columns else ("status",))],
                        sqlite_where=_ENDED, postgresql_where=_ENDED)
    op.drop_index("ix_executions_tool_duration", table_name="executions")
    op.create_index("ix_executions_tool_duration", "executions", ["tool", "duration_ms"],
                    sqlite_where=_TIMED, postgresql_where=_TIMED)
    op.drop_index("ix_executions_run", table_name="executions")
    op.create_index("ix_executions_run", "executions", ["run_id"], sqlite_where=_IN_A_RUN, postgresql_where=_IN_A_RUN)


def downgrade() -> None:
    whole = {**_HISTORY, "ix_executions_tool_duration": ("tool", "duration_ms"), "ix_executions_run": ("run_id",)}
    for name, columns in whole.items():
        op.drop_index(name, table_name="executions")
        op.create_index(name, "executions", list(columns))
