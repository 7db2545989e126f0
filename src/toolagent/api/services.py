"""What the HTTP server shares between requests: store, server pool, runner, and run events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from ..mcp.config import ServersConfig
from ..mcp.pool import ServerPool
from ..runs import BuildRunner, FlowCap, RunEvent
from ..store import Store


def event_json(event: RunEvent) -> dict[str, Any]:
    """A run event as sent to clients."""
    data: dict[str, Any] = {"type": event.kind, "runId": event.run_id}
    if event.status is not None:
        data["status"] = event.status
    if event.step is not None:
        s = event.step
        data["step"] = {"position": s.position, "tool": s.tool, "status": s.status, "error": s.error,
                        "durationMs": s.duration_ms}
    return data


@dataclass
class RunEvents:
    """Fan-out of live run events to subscribers, with replay for late ones while the run lasts."""

    _history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _subscribers: dict[str, list[MemoryObjectSendStream[dict[str, Any]]]] = field(default_factory=dict)

    def started(self, run_id: str) -> None:
        """Begin collecting a run's events."""
        self._history.setdefault(run_id, [])

    def is_live(self, run_id: str) -> bool:
        """The run is being executed by this process."""
        return run_id in self._history

    async def publish(self, event: RunEvent) -> None:
        """Record and forward one event; the run's last event closes its subscribers."""
        data = event_json(event)
        self._history.setdefault(event.run_id, []).append(data)
        for send in list(self._subscribers.get(event.run_id, [])):
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.WouldBlock):
                send.send_nowait(data)
        if event.kind == "run_finished":
            for send in self._subscribers.pop(event.run_id, []):
                send.close()
            self._history.pop(event.run_id, None)

    @contextlib.contextmanager
    def subscribe(self, run_id: str) -> Any:
        """A receive stream of the run's events so far and to come (closed after run_finished)."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1000)
        for data in self._history.get(run_id, []):
            send.send_nowait(data)
        self._subscribers.setdefault(run_id, []).append(send)
        try:
            yield receive
        finally:
            subs = self._subscribers.get(run_id, [])
            if send in subs:
                subs.remove(send)
            send.close()
            receive.close()


@dataclass
class Services:
    """Long-lived objects of one server process."""

    store: Store
    pool: ServerPool
    runner: BuildRunner
    config: ServersConfig
    task_group: anyio.abc.TaskGroup
    events: RunEvents = field(default_factory=RunEvents)
    engine: Any = None


@contextlib.asynccontextmanager
async def open_services(db: str | None, servers: ServersConfig) -> AsyncIterator[Services]:
    """Open the store and the pool for the lifetime of the server."""
    from ..store import open_store

    async with open_store(db) as store, ServerPool(servers) as pool, anyio.create_task_group() as tg:
        services = Services(store=store, pool=pool, runner=BuildRunner(pool, store, flow_cap=FlowCap.from_env()), config=servers, task_group=tg)
        try:
            yield services
        finally:
            tg.cancel_scope.cancel()


