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

`CALL_STATUS_AS` is the one table that translates between them.
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

#: How each way a call ends is stored, audited and shown as a BUILD step: the one table of these
#: translations. A denial is stored as a failed execution (its `denied` column says why); a
#: timeout is a cancelled execution, and a failed step.
CALL_STATUS_AS: dict[CallStatus, tuple[ExecutionStatus, AuditOutcome, StepStatus]] = {
    CallStatus.OK: (ExecutionStatus.SUCCESS, AuditOutcome.SUCCESS, StepStatus.SUCCESS),
    CallStatus.FAILED: (ExecutionStatus.FAILED, AuditOutcome.FAILED, StepStatus.FAILED),
    CallStatus.DENIED: (ExecutionStatus.FAILED, AuditOutcome.DENIED, StepStatus.DENIED),
    CallStatus.TIMED_OUT: (ExecutionStatus.CANCELLED, AuditOutcome.CANCELLED, StepStatus.FAILED),
    CallStatus.CANCELLED: (ExecutionStatus.CANCELLED, AuditOutcome.CANCELLED, StepStatus.CANCELLED),
}
#: The way a call ended, read back from its stored execution (closed by another process, say).
CALL_STATUS_OF: dict[str, CallStatus] = {
    ExecutionStatus.SUCCESS: CallStatus.OK,
    ExecutionStatus.FAILED: CallStatus.FAILED,
    ExecutionStatus.CANCELLED: CallStatus.CANCELLED,
}
#: The audit outcome of an execution that ended with a final status.
AUDIT_OUTCOME_OF: dict[str, AuditOutcome] = {
    ExecutionStatus.SUCCESS: AuditOutcome.SUCCESS,
    ExecutionStatus.FAILED: AuditOutcome.FAILED,
    ExecutionStatus.CANCELLED: AuditOutcome.CANCELLED,
}


def stored_status(status: CallStatus) -> ExecutionStatus:
    """The execution status a call that ended with `status` is stored with."""
    return CALL_STATUS_AS[status][0]


def step_status(status: CallStatus) -> StepStatus:
    """The status of a BUILD step whose call ended with `status`."""
    return CALL_STATUS_AS[status][2]


__all__ = [
    "AUDIT_OUTCOME_OF",
    "CALL_STATUS_AS",
    "CALL_STATUS_OF",
    "FINAL_EXECUTION_STATUSES",
    "AuditOutcome",
    "CallStatus",
    "ExecutionStatus",
    "RunStatus",
    "StepStatus",
    "step_status",
    "stored_status",
]
