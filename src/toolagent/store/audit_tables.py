"""The append-only audit log: one hash-chained row per decision or outcome, and the chain head.

`audit_head` holds a single row (`id = 1`) with the sequence number and hash of the newest
audit row; it is updated in the same transaction as each insert, so deleting rows from the end
of `audit_log` is detected as well as changing or deleting rows in the middle.

Text columns are unbounded on purpose: an audit write must not fail on a long tool name or
reason. `arguments` is the redacted arguments as canonical JSON text, exactly the text hashed.
"""

from __future__ import annotations

import sqlalchemy as sa

from .tables import TS, metadata

#: Sequence numbers: 64-bit on PostgreSQL (SQLite integers are 64-bit already).
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

audit_log = sa.Table(
    "audit_log",
    metadata,
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

audit_head = sa.Table(
    "audit_head",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("seq", SEQ, nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("updated_at", TS, nullable=False),
    sa.CheckConstraint("id = 1", name="ck_audit_head_single_row"),
)
