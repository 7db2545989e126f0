"""A run in progress, as the runner, the deliverable and the event streams see it: each step's live
record and the events that report progress."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..model.spec import ToolResult
from ..model.status import StepStatus


@dataclass
class StepState:
    """A step's live record."""

    position: int
    tool: str
    status: str = StepStatus.PENDING
    params: dict[str, Any] | None = None
    param_sources: dict[str, str] | None = None
    result: ToolResult | None = None
    error: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored and reported form."""
        return {
            "position": self.position,
            "tool": self.tool,
            "status": self.status,
            "params": self.params,
            "paramSources": self.param_sources,
            "result": self.result.to_json() if self.result else None,
            "error": self.error,
            "startedAt": self.started_at.isoformat() if self.started_at else None,
            "endedAt": self.ended_at.isoformat() if self.ended_at else None,
            "durationMs": self.duration_ms,
        }


@dataclass(frozen=True)
class RunEvent:
    """Progress of a run, for terminals and event streams."""

    kind: str  # run_started | step_started | step_finished | run_finished
    run_id: str
    step: StepState | None = None
    status: str | None = None
    error: str | None = None
    """`run_finished`: why the run did not succeed (None when it did)."""
    deliverable_id: str | None = None
    """`run_finished`: the run's stored deliverable."""


EventSink = Callable[[RunEvent], Awaitable[None] | None]


__all__ = ["EventSink", "RunEvent", "StepState"]
