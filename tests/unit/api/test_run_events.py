"""The events a run's stored record replays: the order its runner sent them in, so the ids of a live
stream and of a replay agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from toolagent.api.run_events import stored_events
from toolagent.store.runs import RunRow, StepRow

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def _run(status: str) -> RunRow:
    ended = status not in ("running", "queued")
    return RunRow(
        id="run_1",
        organization_slug="demo",
        agent_slug="a",
        agent_version="1",
        user_id="bob",
        status=status,
        execution_mode="parallel",
        stop_on_error=True,
        payload={},
        overrides=None,
        error="1 step(s) failed: s/b" if status == "failed" else None,
        started_at=T0,
        ended_at=_at(100) if ended else None,
        duration_ms=100.0 if ended else None,
        deliverable_id="dlv_1" if ended else None,
    )


def _step(position: int, status: str, started: int | None, ended: int | None) -> StepRow:
    return StepRow(
        run_id="run_1",
        position=position,
        tool=f"s/{'abcd'[position]}",
        status=status,
        params={},
        param_sources={},
        result=None,
        error=None,
        started_at=_at(started) if started is not None else None,
        ended_at=_at(ended) if ended is not None else None,
        duration_ms=float(ended - started) if started is not None and ended is not None else None,
    )


def _shape(events: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [(e["type"], e["step"]["tool"], e["step"]["status"]) if "step" in e else (e["type"],) for e in events]


def test_steps_replay_in_time_order_then_the_unstarted_ones_then_run_finished() -> None:
    steps = [
        _step(0, "success", 0, 50),  # parallel: a and b overlap, b ends first
        _step(1, "failed", 10, 30),
        _step(2, "success", 30, 60),  # starts in the very microsecond b ends: after b's end
        _step(3, "cancelled", None, None),  # never started
    ]
    events = stored_events(_run("failed"), steps)
    assert _shape(events) == [
        ("run_started",),
        ("step_started", "s/a", "running"),
        ("step_started", "s/b", "running"),
        ("step_finished", "s/b", "failed"),
        ("step_started", "s/c", "running"),
        ("step_finished", "s/a", "success"),
        ("step_finished", "s/c", "success"),
        ("step_finished", "s/d", "cancelled"),
        ("run_finished",),
    ]
    assert events[1]["step"] == {"position": 0, "tool": "s/a", "status": "running", "error": None, "durationMs": None}
    assert events[-1] == {
        "type": "run_finished",
        "runId": "run_1",
        "status": "failed",
        "deliverableId": "dlv_1",
        "error": "1 step(s) failed: s/b",
    }


def test_a_later_read_of_a_running_run_only_appends() -> None:
    early = stored_events(_run("running"), [_step(0, "running", 0, None), _step(1, "pending", None, None)])
    later = stored_events(_run("running"), [_step(0, "success", 0, 40), _step(1, "running", 40, None)])
    done = stored_events(_run("success"), [_step(0, "success", 0, 40), _step(1, "success", 40, 90)])
    assert _shape(early) == [("run_started",), ("step_started", "s/a", "running")]
    assert later[: len(early)] == early and done[: len(later)] == later
    assert _shape(done)[len(later) :] == [("step_finished", "s/b", "success"), ("run_finished",)]
