"""What the HTTP server shares between requests: the runtime, live runs and their events."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from ..mcp.config import ServersConfig
from ..mcp.pool import ServerPool
from ..runs import BuildPlan, BuildRunner, RunEvent, RunOutcome
from ..runtime import Runtime, open_runtime
from ..settings import Settings
from ..store import Store
from ..workers.dispatch import Dispatcher
from .run_events import RunEvents

log = logging.getLogger(__name__)

#: How long a cancel request waits for a run to end before answering.
RUN_CANCEL_WAIT_S = 5.0
#: How long a run of this process gets to stop through the engine before its own scope is cancelled.
RUN_CANCEL_GRACE_S = 2.0


@dataclass
class LiveRun:
    """A BUILD run executing in this process."""

    run_id: str
    runner: BuildRunner
    """The caller's runner (its steps pass the engine's gate as the caller)."""
    started: anyio.Event = field(default_factory=anyio.Event)
    """Set once the run is recorded and cancellable (or has ended)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """Set once the run has ended and its outcome is stored."""


@dataclass
class LiveRuns:
    """The BUILD runs of this process: started, streamed to subscribers, cancelled, awaited.

    A run is registered before its request answers (so a cancel or an event subscription that
    follows at once finds it) and forgotten when it ends, whatever way it ends.
    """

    events: RunEvents = field(default_factory=RunEvents)
    _runs: dict[str, LiveRun] = field(default_factory=dict)

    def begin(self, run_id: str, runner: BuildRunner) -> LiveRun:
        """Register a run about to start."""
        live = self._runs[run_id] = LiveRun(run_id, runner)
        self.events.started(run_id)
        return live

    def get(self, run_id: str) -> LiveRun | None:
        """The live run, if it executes here."""
        return self._runs.get(run_id)

    async def execute(
        self,
        live: LiveRun,
        plan: BuildPlan,
        payload: Mapping[str, Any],
        *,
        user: str,
        metadata: Mapping[str, Any] | None,
    ) -> RunOutcome:
        """Run to the end, publishing its events; never leaves the run registered."""

        async def sink(event: RunEvent) -> None:
            if event.kind == "run_started":
                live.started.set()
            await self.events.publish(event)

        try:
            return await live.runner.run(plan, payload, user=user, metadata=metadata, run_id=live.run_id, on_event=sink)
        finally:
            self._runs.pop(live.run_id, None)
            self.events.ended(live.run_id)
            live.started.set()
            live.done.set()

    async def start(
        self,
        task_group: anyio.abc.TaskGroup,
        live: LiveRun,
        plan: BuildPlan,
        payload: Mapping[str, Any],
        *,
        user: str,
        metadata: Mapping[str, Any] | None,
    ) -> None:
        """Run in the background; return once the run is recorded (GET /api/runs/{id} finds it)."""

        async def background() -> None:
            try:
                await self.execute(live, plan, payload, user=user, metadata=metadata)
            except Exception:  # noqa: BLE001 - a background run has nobody to raise to; the server must live on
                log.exception("background run %s failed", live.run_id)

        task_group.start_soon(background)
        await live.started.wait()

    async def cancel(self, run_id: str) -> bool:
        """Stop a run of this process (its running steps end cancelled, later ones are not run)."""
        live = self._runs.get(run_id)
        if live is None:
            return False
        if not live.started.is_set():
            # Registered but not yet recorded: its runner only becomes cancellable once it is.
            with anyio.move_on_after(RUN_CANCEL_WAIT_S):
                await live.started.wait()
        return live.runner.cancel(run_id)

    async def wait(self, run_id: str, timeout_s: float = RUN_CANCEL_WAIT_S) -> bool:
        """Wait (at most `timeout_s`) for a run of this process to end; whether it has (True when it
        is not live here)."""
        live = self._runs.get(run_id)
        if live is not None:
            with anyio.move_on_after(timeout_s):
                await live.done.wait()
        return live is None or live.done.is_set()


@dataclass
class Services:
    """Long-lived objects of one server process."""

    runtime: Runtime
    """Store, catalogue, tool stack, cancellation, principals and reads."""
    config: ServersConfig
    task_group: anyio.abc.TaskGroup
    settings: Settings = field(default_factory=Settings.defaults)
    """The settings the server was started with."""
    dispatch: Dispatcher = Dispatcher.HERE
    """Where BUILD runs and async calls go (here, or to the workers), decided once at start."""
    runs: LiveRuns = field(default_factory=LiveRuns)

    @property
    def store(self) -> Store:
        """The runtime's store."""
        return self.runtime.store

    @property
    def pool(self) -> ServerPool:
        """The runtime's MCP servers."""
        assert self.runtime.pool is not None
        return self.runtime.pool

    @property
    def engine(self) -> Runtime:
        """The runtime (the name the routes read it by)."""
        return self.runtime

    @property
    def events(self) -> RunEvents:
        """Event fan-out of the live runs."""
        return self.runs.events


@contextlib.asynccontextmanager
async def open_services(
    db: str | None, servers: ServersConfig, *, settings: Settings | None = None, submit: bool = False
) -> AsyncIterator[Services]:
    """Open the runtime (store, servers), decide where BUILD runs and async calls go (`submit`:
    `serve --submit`; see `Dispatcher.decide`) and list every server's tools for the server's lifetime.

    Raises:
        UsageError: `submit` on a SQLite store.
    """
    settings = settings if settings is not None else Settings.defaults()
    async with open_runtime(db, servers, settings=settings) as runtime, anyio.create_task_group() as tg:
        dispatch = Dispatcher.decide(submit=submit, execution=settings.execution, sqlite=runtime.db.is_sqlite)
        if dispatch.note:
            log.warning("%s", dispatch.note)
        await runtime.catalogue.refresh()
        services = Services(runtime=runtime, config=servers, task_group=tg, settings=settings, dispatch=dispatch)
        try:
            yield services
        finally:
            tg.cancel_scope.cancel()
