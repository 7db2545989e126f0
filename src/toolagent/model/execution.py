"""An execution's record: the `Execution` value, its stored columns and the fixed bounds
(timeouts, duration buckets) every part of the engine agrees on. The verbs over the table are
`store/executions.py`.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from .owner import Owner
from .redaction import redact_values
from .spec import ToolResult
from .status import FINAL_EXECUTION_STATUSES, ExecutionStatus
from .times import as_utc

if TYPE_CHECKING:
    from .limits import LimitStatus

#: Bounds of a call's timeout in milliseconds: no execution outlives the upper one.
MIN_TIMEOUT_MS: Final = 1_000
MAX_TIMEOUT_MS: Final = 300_000
#: Execution states; all but `queued` (an async call waiting for a worker) and `running` are final.
STATUSES: Final = tuple(ExecutionStatus)
FINAL_STATUSES: Final = FINAL_EXECUTION_STATUSES
#: Reason of executions closed because their process died.
INTERRUPTED: Final = "interrupted"
#: Grace on top of a row's timeout before any host may close it as interrupted.
ORPHAN_GRACE_S: Final = 60.0
#: Upper bounds (seconds) of the per-tool duration buckets (the Prometheus histogram's).
DURATION_BUCKETS_S: Final[tuple[float, ...]] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
BOUNDS_MS: Final = tuple(b * 1000 for b in DURATION_BUCKETS_S)


def bucket_index(duration_ms: float) -> int:
    """The duration bucket of `duration_ms`: the first bound it does not exceed (`len` past the last)."""
    return bisect.bisect_left(BOUNDS_MS, duration_ms)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class Execution:
    """One tool execution: what was called, for whom, and how it ended."""

    id: str
    """`exec_{timestamp}_{random}`."""
    tool: str
    """Qualified tool name."""
    category: str
    """The tool's category."""
    risk: str
    """The tool's risk when it was called."""
    status: str
    """`running`, `success`, `failed` or `cancelled`."""
    user: str
    """Who it ran for."""
    started_at: datetime
    """When it was asked for (UTC)."""
    level: str | None = None
    """The caller's permission level then."""
    api_key_id: str | None = None
    """The API key used, if any."""
    session_id: str | None = None
    """The caller's session id (execution context)."""
    run_id: str | None = None
    """The BUILD run it belongs to, if any."""
    metadata: Mapping[str, Any] | None = None
    """The caller's metadata (redacted)."""
    arguments: Any = None
    """The tool arguments (redacted)."""
    timeout_ms: int | None = None
    """Its timeout."""
    ended_at: datetime | None = None
    """When it ended (UTC)."""
    duration_ms: float | None = None
    """How long the call ran (monotonic clock); None for denials."""
    result: ToolResult | None = None
    """What the tool returned (also kept when the tool reported an error)."""
    error: str | None = None
    """Error message of a failed execution."""
    reason: str | None = None
    """Why it was denied, cancelled or interrupted."""
    denied: bool = False
    """The gate refused it; it never reached a server."""
    denial: str | None = None
    """The denial code (`level`, `api_key_scope`, `rate_limited`, ...)."""
    cancel_requested_by: str | None = None
    """Who asked to cancel it, while the cancellation is on its way."""
    owner: Owner | None = field(default=None, compare=False)
    """The process that ran it."""
    audit_arguments: str | None = field(default=None, compare=False, repr=False)
    """`arguments` as the audit log spells them (`engine.audit.spell_arguments`), spelled once for
    both of the call's audit rows (this process only: not stored)."""
    limits: tuple[LimitStatus, ...] = field(default=(), compare=False, repr=False)
    """Where the caller's rate limits and budget stood once this call was counted
    (`LimitStatus`es, this process only: not stored)."""

    @property
    def finished(self) -> bool:
        """In a final state."""
        return self.status in FINAL_STATUSES

    def running_time_ms(self, now: datetime) -> float:
        """Milliseconds since it started (its duration once finished)."""
        if self.duration_ms is not None:
            return self.duration_ms
        return max(0.0, (now - self.started_at).total_seconds() * 1000)

    def to_json(self, *, now: datetime | None = None) -> dict[str, Any]:
        """API form: the getToolStatus / history field names, plus the engine's own."""
        data: dict[str, Any] = {
            "id": self.id,
            "toolName": self.tool,
            "category": self.category,
            "risk": self.risk,
            "status": self.status,
            "userId": self.user,
            "level": self.level,
            "apiKeyId": self.api_key_id,
            "sessionId": self.session_id,
            "runId": self.run_id,
            "metadata": dict(self.metadata) if self.metadata is not None else None,
            "arguments": self.arguments,
            "timeout": self.timeout_ms,
            "timeoutMs": self.timeout_ms,
            "startTime": _iso(self.started_at),
            "endTime": _iso(self.ended_at),
            "executionTime": self.duration_ms,
            "executionTimeMs": self.duration_ms,
            "result": self.result.to_json() if self.result is not None else None,
            "error": self.error,
            "reason": self.reason,
            "denied": self.denied,
            "denial": self.denial,
        }
        if self.status == ExecutionStatus.RUNNING:
            data["runningTime"] = data["runningTimeMs"] = self.running_time_ms(now or datetime.now(UTC))
            data["cancelRequestedBy"] = self.cancel_requested_by
        return data

    @classmethod
    def from_row(cls, row: Any) -> Execution:
        """From an `executions` row."""
        m = row._mapping
        raw = m["result"]
        result = None
        if isinstance(raw, dict):
            result = ToolResult.from_json(raw)
        owner = (
            Owner(m["owner_pid"], m["owner_host"] or "", m["owner_boot"] or "") if m["owner_pid"] is not None else None
        )
        return cls(
            id=m["id"],
            tool=m["tool"],
            category=m["category"],
            risk=m["risk"],
            status=m["status"],
            user=m["user_name"],
            started_at=as_utc(m["started_at"]),
            level=m["level"],
            api_key_id=m["api_key_id"],
            session_id=m["session_id"],
            run_id=m["run_id"],
            metadata=m["metadata"],
            arguments=m["arguments"],
            timeout_ms=m["timeout_ms"],
            ended_at=as_utc(m["ended_at"]),
            duration_ms=m["duration_ms"],
            result=result,
            error=m["error"],
            reason=m["reason"],
            denied=bool(m["denied"]),
            denial=m["denial"],
            cancel_requested_by=m["cancel_requested_by"],
            owner=owner,
        )


def row_values(execution: Execution) -> dict[str, Any]:
    """The `executions` columns of a record, secrets masked (arguments, metadata, result, error, reason)."""
    owner = execution.owner
    return redact_values(
        {
            "id": execution.id,
            "tool": execution.tool,
            "category": execution.category,
            "risk": execution.risk,
            "denied": execution.denied,
            "denial": execution.denial,
            "user_name": execution.user,
            "level": execution.level,
            "api_key_id": execution.api_key_id,
            "session_id": execution.session_id,
            "run_id": execution.run_id,
            "metadata": dict(execution.metadata) if execution.metadata is not None else None,
            "arguments": execution.arguments,
            "timeout_ms": execution.timeout_ms,
            "started_at": execution.started_at,
            **_final_fields(execution),
            "owner_pid": owner.pid if owner else None,
            "owner_host": owner.host if owner else None,
            "owner_boot": owner.boot if owner else None,
        },
        data=("arguments", "metadata", "result"),
        text=("error", "reason"),
    )


def final_values(execution: Execution) -> dict[str, Any]:
    """The columns a record's final state sets (status, end, duration, result, error and reason),
    secrets masked as `row_values` masks them."""
    return redact_values(_final_fields(execution), data=("result",), text=("error", "reason"))


def _final_fields(execution: Execution) -> dict[str, Any]:
    return {
        "status": execution.status,
        "ended_at": execution.ended_at,
        "duration_ms": execution.duration_ms,
        "result": execution.result.to_json() if execution.result is not None else None,
        "error": execution.error,
        "reason": execution.reason,
    }


__all__ = [
    "BOUNDS_MS",
    "DURATION_BUCKETS_S",
    "FINAL_STATUSES",
    "INTERRUPTED",
    "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS",
    "ORPHAN_GRACE_S",
    "STATUSES",
    "Execution",
    "bucket_index",
    "final_values",
    "row_values",
]
