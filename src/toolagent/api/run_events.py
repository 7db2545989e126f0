"""A run's progress as server-sent events: live from this process's runner, or replayed and followed
from the store.

Every event of a run has an id, its place in the run's one sequence of events: `run_started` is 1,
then each step's `step_started` and `step_finished` in the order they happened, the steps that never
started (skipped, cancelled before their turn) in position order, and `run_finished` last. The store
keeps what that order is made of (each step's start and end time), so a stream read live, replayed
after the run ended, or followed in another process numbers the same events alike, and a client
that reconnects with `Last-Event-ID: N` gets the events after the N-th only.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..model.owner import Owner, gone
from ..model.status import RunStatus, StepStatus
from ..runs import RunEvent
from ..store.runs import RunRow, StepRow

if TYPE_CHECKING:
    from .services import Services

#: Seconds between keep-alive comments on an idle event stream (proxies drop silent connections).
SSE_KEEPALIVE_S = 15.0
#: Seconds between store reads when following a run that executes in another process.
SSE_POLL_S = 0.5
#: Events buffered per subscriber of a run's event stream.
EVENT_BUFFER = 1000
#: Run statuses of a run that has not ended yet.
_ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)

Numbered = tuple[int, dict[str, Any]]


def _step_json(position: int, tool: str, status: str, error: str | None, duration_ms: float | None) -> dict[str, Any]:
    return {"position": position, "tool": tool, "status": status, "error": error, "durationMs": duration_ms}


def event_json(event: RunEvent) -> dict[str, Any]:
    """A run event as sent to clients."""
    data: dict[str, Any] = {"type": event.kind, "runId": event.run_id}
    if event.status is not None:
        data["status"] = event.status
    if event.kind == "run_finished":
        data["deliverableId"] = event.deliverable_id
        data["error"] = event.error
    if event.step is not None:
        s = event.step
        data["step"] = _step_json(s.position, s.tool, s.status, s.error, s.duration_ms)
    return data


def stored_events(row: RunRow, steps: Sequence[StepRow]) -> list[dict[str, Any]]:
    """The events a run has had so far, as its runner sent them, from its stored record: `run_started`,
    each step's start and end in time order, the steps that never started, and `run_finished` once
    the run has ended. A later read of the same run only appends to this list."""
    timed: list[tuple[datetime, int, int, dict[str, Any]]] = []
    unstarted: list[dict[str, Any]] = []
    for s in steps:
        if s.status == StepStatus.PENDING:
            continue
        ended = s.status != StepStatus.RUNNING
        finished = {"type": "step_finished", "runId": row.id, "step": _step_json(*_fields(s))}
        if s.started_at is None:
            if ended:
                unstarted.append(finished)
            continue
        started = {
            "type": "step_started",
            "runId": row.id,
            "step": _step_json(s.position, s.tool, StepStatus.RUNNING, None, None),
        }
        timed.append((s.started_at, s.position, 0, started))
        if ended:
            # A step closed without an end time (its process died) ends where the run does.
            timed.append((s.ended_at or row.ended_at or s.started_at, s.position, 1, finished))
    events: list[dict[str, Any]] = [{"type": "run_started", "runId": row.id}]
    # Position breaks ties: one step's end and the next one's start may carry the same microsecond.
    events += [e for *_, e in sorted(timed, key=lambda t: (t[0], t[1], t[2]))]
    if row.status not in _ACTIVE:
        events += unstarted
        events.append(
            {
                "type": "run_finished",
                "runId": row.id,
                "status": row.status,
                "deliverableId": row.deliverable_id,
                "error": row.error,
            }
        )
    return events


def _fields(s: StepRow) -> tuple[int, str, str, str | None, float | None]:
    return s.position, s.tool, s.status, s.error, s.duration_ms


@dataclass
class RunEvents:
    """Fan-out of live run events to subscribers, numbered, with replay for late ones while the run lasts."""

    _history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _subscribers: dict[str, list[MemoryObjectSendStream[Numbered]]] = field(default_factory=dict)

    def started(self, run_id: str) -> None:
        """Begin collecting a run's events."""
        self._history.setdefault(run_id, [])

    def is_live(self, run_id: str) -> bool:
        """The run is being executed by this process."""
        return run_id in self._history

    async def publish(self, event: RunEvent) -> None:
        """Record and forward one event; the run's last event closes its subscribers."""
        data = event_json(event)
        history = self._history.setdefault(event.run_id, [])
        history.append(data)
        for send in list(self._subscribers.get(event.run_id, [])):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
                send.send_nowait((len(history), data))
        if event.kind == "run_finished":
            self.ended(event.run_id)

    def ended(self, run_id: str) -> None:
        """Close the run's subscribers and forget it (also when it died without `run_finished`)."""
        for send in self._subscribers.pop(run_id, []):
            send.close()
        self._history.pop(run_id, None)

    @contextlib.contextmanager
    def subscribe(self, run_id: str, after: int = 0) -> Iterator[MemoryObjectReceiveStream[Numbered]]:
        """A receive stream of the run's events after the `after`-th, so far and to come, each with its
        id (closed after run_finished)."""
        history = self._history.get(run_id, [])
        send, receive = anyio.create_memory_object_stream[Numbered](max(EVENT_BUFFER, len(history) + 1))
        for i, data in enumerate(history[after:], start=after + 1):
            send.send_nowait((i, data))
        self._subscribers.setdefault(run_id, []).append(send)
        try:
            yield receive
        finally:
            subs = self._subscribers.get(run_id, [])
            if send in subs:
                subs.remove(send)
            send.close()
            receive.close()


def sse(event_id: int, data: dict[str, Any]) -> str:
    """One event in the `text/event-stream` format."""
    return f"id: {event_id}\nevent: {data['type']}\ndata: {json.dumps(data, default=str)}\n\n"


async def run_event_stream(svc: Services, row: RunRow, after: int = 0) -> AsyncIterator[str]:
    """The run's events after the `after`-th, until `run_finished`."""
    # Decided when the stream starts, not when the request came: the run may have ended meanwhile.
    stream = _live_events(svc, row.id, after) if svc.events.is_live(row.id) else _followed_events(svc, row, after)
    async for chunk in stream:
        yield chunk


async def _live_events(svc: Services, run_id: str, after: int) -> AsyncIterator[str]:
    """Events of a run executing in this process, straight from its runner."""
    with svc.events.subscribe(run_id, after) as receive:
        while True:
            with anyio.move_on_after(SSE_KEEPALIVE_S) as idle:
                try:
                    event_id, data = await receive.receive()
                except anyio.EndOfStream:
                    return
            if idle.cancelled_caught:
                yield ": keep-alive\n\n"
                continue
            yield sse(event_id, data)
            if data["type"] == "run_finished":
                return


async def _followed_events(svc: Services, row: RunRow, after: int) -> AsyncIterator[str]:
    """Events of a run that ended, or that executes in another process: from the store, read again
    until the run ends."""
    sent = after
    quiet_s = 0.0
    while True:
        events = stored_events(row, await svc.store.runs.get_steps(row.id))
        for event_id, data in enumerate(events[sent:], start=sent + 1):
            yield sse(event_id, data)
            quiet_s = 0.0
        sent = max(sent, len(events))
        if row.status not in _ACTIVE:
            return
        await anyio.sleep(SSE_POLL_S)
        quiet_s += SSE_POLL_S
        if quiet_s >= SSE_KEEPALIVE_S:
            quiet_s = 0.0
            yield ": keep-alive\n\n"
        row = await svc.store.runs.get_run(row.id)
        if row.status == RunStatus.RUNNING and gone(row.owner_pid, row.owner_host, row.owner_boot, Owner.current()):
            # Its process ended without finishing it: close it, so the stream can end.
            await svc.store.runs.close_interrupted(run_id=row.id)
            row = await svc.store.runs.get_run(row.id)


__all__ = [
    "EVENT_BUFFER",
    "SSE_KEEPALIVE_S",
    "SSE_POLL_S",
    "RunEvents",
    "event_json",
    "run_event_stream",
    "sse",
    "stored_events",
]
