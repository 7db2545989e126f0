"""Every status toolagent records or reports, as `StrEnum`s.

The values are the strings stored in the database and sent over the wire, so a member compares
equal to its string (`ExecutionStatus.SUCCESS == "success"`) and serialises as it.

- `ExecutionStatus`: one tool execution's record (`executions.status`); `queued` only for an async
  call submitted to the workers and not admitted yet.
- `CallStatus`: how one call through the tool stack ended (`CallOutcome.status`); a denial is
  recorded as a `failed` execution with `denied` set, a timeout as a `cancelled` one.
- `StepStatus`: one BUILD step (`run_steps.status`).
- `RunStatus`: one BUILD run (`runs.status`).
- `AuditOutcome`: the outcome an audit row records.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionStatus(StrEnum):
    """A tool execution's stored status (`queued`: submitted to the workers, not admitted yet)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CallStatus(StrEnum):
    """How one call through the tool stack ended."""

    OK = "ok"
    FAILED = "failed"
    DENIED = "denied"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


class StepStatus(StrEnum):
    """A BUILD step's status."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    DENIED = "denied"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class RunStatus(StrEnum):
    """A BUILD run's status (`queued`: submitted to the workers, not started yet)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class AuditOutcome(StrEnum):
    """How a call ended, as its outcome audit row says (a refusal is `denied`)."""

    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DENIED = "denied"


#: Execution statuses that end an execution.
FINAL_EXECUTION_STATUSES = frozenset({ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED})

__all__ = ["FINAL_EXECUTION_STATUSES", "AuditOutcome", "CallStatus", "ExecutionStatus", "RunStatus", "StepStatus"]
