"""SQLAlchemy Core tables: today's schema. The Alembic revisions in `migrations/versions/` create
and evolve them; a test checks that replaying them ends in exactly this shape."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)

metadata = sa.MetaData()

agents = sa.Table(
    "agents",
    metadata,
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

runs = sa.Table(
    "runs",
    metadata,
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
    # The process running it (migration 5): a run whose process is gone is closed as interrupted.
    sa.Column("owner_pid", sa.Integer),
    sa.Column("owner_host", sa.String(255)),
    sa.Column("owner_boot", sa.String(64)),
    # Submitted to the workers (migration 6): what a worker needs to run it as its caller, and
    # which worker claimed it (a run whose worker stopped is closed by the reaper, not by owner_pid).
    sa.Column("plan", JSON),
    sa.Column("principal", sa.String(200)),
    sa.Column("api_key_id", sa.String(64)),
    sa.Column("run_metadata", JSON),
    sa.Column("queued_at", TS),
    sa.Column("job_id", sa.BigInteger),
    sa.Column("worker", sa.String(100)),
    sa.Column("worker_host", sa.String(255)),
    sa.Index("ix_runs_agent", "organization_slug", "agent_slug", "started_at"),
    sa.Index("ix_runs_started", "started_at"),
    sa.Index("ix_runs_status", "status"),
)

run_steps = sa.Table(
    "run_steps",
    metadata,
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

deliverables = sa.Table(
    "deliverables",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False, unique=True),
    sa.Column("format", sa.String(20), nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("data", JSON, nullable=False),
    sa.Column("metadata", JSON, nullable=False),
    sa.Column("created_at", TS, nullable=False),
)

# What a worker needs of a submitted run or call (its plan, payload, arguments, metadata) before
# redaction, keyed by the run or execution id (migration 9). The row is deleted when the run or
# call ends, however it ends; the rows shown to people hold the redacted form only.
queued_inputs = sa.Table(
    "queued_inputs",
    metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("data", JSON, nullable=False),
    sa.Column("created_at", TS, nullable=False),
)
