"""The execution engine's tables: principals, API keys, executions, limit counters, run cancellations.

`executions` is both the live table (rows in status `queued` or `running`) and the history. Its
history indexes hold `(started_at, id)` right after their filter's columns, the order history
pages are read in (newest first), so a page with any one filter — or the caller's own rows with
one more filter — is an index range read that stops after `offset + limit` rows instead of a sort
over every match. They hold ended executions only (`ENDED`): a call's admission writes its row
into the key's index and `ix_executions_status` (and `ix_executions_run`, which holds BUILD steps
only) instead of ten, and its final write adds it to the history indexes once, instead of moving
it in them. Executions in flight are few and are read through `ix_executions_status`; a history
read states `ENDED` or `LIVE` (the same SQL text: a partial index serves a query that states its
condition) and merges the two parts (`store/history.py`).

`execution_totals` keeps, per (tool, user, final status, denial code — empty when not denied),
the executions that ended, how many of them have a duration, the durations' sum and the latest
start; `execution_buckets` counts durations per tool in the buckets of
`model.execution.DURATION_BUCKETS_S` (index `len(...)` is "longer than the last bound"). Both are
changed in the transaction that writes an execution's final state and when executions are
pruned, so they always add up to the `executions` rows that ended, and metrics read them instead
of scanning the history. `ix_executions_tool_duration` answers percentiles: the k-th shortest
duration of a tool is an index range read.

`limit_counters` holds one fixed-window counter per key (`rate|user:bob`, `rate|user:bob|tool:fs/read`,
`budget|user:bob`, ...): the window number (`window_no`) and the calls counted in it (`calls`). A counter is raised
with one conditional `UPDATE ... WHERE calls < limit`, which both databases apply atomically
(SQLite under its write lock, PostgreSQL under the row lock, re-checking the condition after a
concurrent writer commits), so a limit is exact across tasks and processes.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..model.status import ExecutionStatus
from .tables import JSON, TS, metadata

#: Window numbers and counters: 64-bit on PostgreSQL (SQLite integers are 64-bit already).
BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

users = sa.Table(
    "users",
    metadata,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("level", sa.String(20), nullable=False),
    sa.Column("plan", sa.String(20), nullable=False),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("updated_at", TS, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
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

#: Statuses of executions not ended yet.
LIVE_STATUSES = (ExecutionStatus.QUEUED, ExecutionStatus.RUNNING)
_LIVE_LIST = ", ".join(f"'{s.value}'" for s in LIVE_STATUSES)
#: The condition of the partial history indexes, and its complement. Literal SQL, not bound
#: parameters: neither database can match a partial index's condition against a parameter.
ENDED = sa.text(f"status NOT IN ({_LIVE_LIST})")
LIVE = sa.text(f"status IN ({_LIVE_LIST})")
#: The condition of `ix_executions_tool_duration`: executions that ran and ended.
TIMED = sa.text("duration_ms IS NOT NULL")
#: The condition of `ix_executions_run`: BUILD steps (every read by run compares `run_id`, which
#: both databases take to imply it).
IN_A_RUN = sa.text("run_id IS NOT NULL")


def _history_index(name: str, *columns: str) -> sa.Index:
    """An index of ended executions over `columns`, then `status` unless among them: a read states
    `ENDED`, and SQLite checks a condition its partial index implies on each entry all the same,
    from the entry itself when it holds the column (merging a page's parts then reads no rows)."""
    trailing = () if "status" in columns else ("status",)
    return sa.Index(name, *columns, *trailing, sqlite_where=ENDED, postgresql_where=ENDED)


executions = sa.Table(
    "executions",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("tool", sa.String(300), nullable=False),
    sa.Column("category", sa.String(20), nullable=False),
    sa.Column("risk", sa.String(20), nullable=False),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("denied", sa.Boolean, nullable=False, default=False),
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
    _history_index("ix_executions_user_started", "user_name", "started_at", "id"),
    _history_index("ix_executions_user_tool", "user_name", "tool", "started_at", "id"),
    _history_index("ix_executions_user_category", "user_name", "category", "started_at", "id"),
    _history_index("ix_executions_user_status", "user_name", "status", "started_at", "id"),
    _history_index("ix_executions_started", "started_at", "id"),
    _history_index("ix_executions_tool", "tool", "started_at", "id"),
    _history_index("ix_executions_category", "category", "started_at", "id"),
    sa.Index("ix_executions_status", "status", "started_at", "id"),
    sa.Index("ix_executions_run", "run_id", sqlite_where=IN_A_RUN, postgresql_where=IN_A_RUN),
    sa.Index("ix_executions_tool_duration", "tool", "duration_ms", sqlite_where=TIMED, postgresql_where=TIMED),
)

execution_totals = sa.Table(
    "execution_totals",
    metadata,
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

execution_buckets = sa.Table(
    "execution_buckets",
    metadata,
    sa.Column("tool", sa.String(300), primary_key=True),
    sa.Column("bucket", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("calls", BIGINT, nullable=False),
)

limit_counters = sa.Table(
    "limit_counters",
    metadata,
    sa.Column("key", sa.String(600), primary_key=True),
    sa.Column("window_no", BIGINT, nullable=False),
    sa.Column("calls", BIGINT, nullable=False),
)

#: One row (id 1) whose `epoch` rises with every key revocation and every change of a user's level
#: or plan: processes that cache API keys drop their cache when it moves (`store.principals`).
principal_epoch = sa.Table(
    "principal_epoch",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("epoch", BIGINT, nullable=False),
)

run_cancellations = sa.Table(
    "run_cancellations",
    metadata,
    sa.Column("run_id", sa.String(64), primary_key=True),
    sa.Column("requested_by", sa.String(200), nullable=False),
    sa.Column("requested_at", TS, nullable=False),
)

organizations = sa.Table(
    "organizations",
    metadata,
    sa.Column("slug", sa.String(200), primary_key=True),
    sa.Column("created_at", TS, nullable=False),
    sa.Column("created_by", sa.String(200)),
)

# A user's role in an organization (migration 8): `viewer`, `editor` or `admin` (`engine.ownership`).
org_members = sa.Table(
    "org_members",
    metadata,
    sa.Column("org_slug", sa.String(200), sa.ForeignKey("organizations.slug", ondelete="CASCADE"), primary_key=True),
    sa.Column("user_name", sa.String(200), sa.ForeignKey("users.name", ondelete="CASCADE"), primary_key=True),
    sa.Column("role", sa.String(20), nullable=False),
    sa.Column("granted_at", TS, nullable=False),
    sa.Column("granted_by", sa.String(200)),
    sa.Index("ix_org_members_user", "user_name"),
)

#: Every table of the engine, in creation order (the migration creates them in this order).
ENGINE_TABLES = (
    users,
    api_keys,
    executions,
    execution_totals,
    execution_buckets,
    limit_counters,
    run_cancellations,
    principal_epoch,
)
