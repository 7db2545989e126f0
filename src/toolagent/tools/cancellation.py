"""Cancellation by id: in this process at once, in another through the store.

Each running call registers its cancel scope here under its execution id (the timeout layer
does), so `cancel(id)` in this process cancels it before any I/O. A cancellation asked for by
another process is a flag on the execution row: one watcher task polls the flags of this
process's running calls (every `poll_s`) while there are any, and cancels their scopes.
Abandoning a call cancels the task awaiting the MCP response, and the MCP SDK then sends
`notifications/cancelled` to the server itself.

Starting closes the executions of processes that died while running them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import anyio
import anyio.abc

from ..engine.principals import Principal
from ..errors import NotFound, StoreError, UsageError
from ..model.execution import Execution
from ..model.status import ExecutionStatus
from ..store.executions import ExecutionStore, Owner, pid_alive
from .records import Recorder

logger = logging.getLogger("toolagent.tools.cancellation")

#: How long `cancel` waits for the execution to end before returning it as it is.
CANCEL_WAIT_S = 5.0


@dataclass
class Active:
    """A call running in this process: its cancel scope and who cancelled it."""

    execution_id: str
    user: str
    run_id: str | None
    scope: anyio.CancelScope
    cancelled_by: str | None = None
    ended: bool = False
    _done: anyio.Event | None = field(default=None, repr=False)
    """Made only for someone waiting for the end (`wait_ended`): most calls end unwatched."""

    def cancel(self, by: str) -> None:
        """Cancel the call's scope, remembering the first who asked."""
        if self.cancelled_by is None:
            self.cancelled_by = by
        self.scope.cancel()

    async def wait_ended(self) -> None:
        """Wait until the call is released (its outcome recorded)."""
        if not self.ended:
            if self._done is None:
                self._done = anyio.Event()
            await self._done.wait()

    def end(self) -> None:
        """Mark the call released, waking whoever waits for it."""
        self.ended = True
        if self._done is not None:
            self._done.set()


@dataclass
class Cancellation:
    """The running calls of this process, and cancelling them or others' (see the module docstring)."""

    executions: ExecutionStore
    recorder: Recorder
    owner: Owner
    poll_s: float = 0.1
    clock: Callable[[], float] = field(default=time.time)
    _active: dict[str, Active] = field(default_factory=dict)
    _wake: anyio.Event = field(default_factory=anyio.Event)
    _stack: AsyncExitStack | None = None
    _tg: anyio.abc.TaskGroup | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """Between `start` and `aclose`."""
        return self._stack is not None

    async def start(self) -> list[str]:
        """Close executions orphaned by dead processes and start the watcher; returns the closed ids."""
        if self._stack is not None:
            return []
        closed = await self.executions.close_interrupted(self.owner, self._now())
        for execution_id in closed:
            execution = await self.executions.get(execution_id)
            if execution is not None:
                await self.recorder.audit_outcome(execution)
        if closed:
            logger.warning("closed %d interrupted executions: %s", len(closed), ", ".join(closed))
        stack = AsyncExitStack()
        tg = await stack.enter_async_context(anyio.create_task_group())
        tg.start_soon(self._watch)
        self._stack = stack
        self._tg = tg
        return closed

    async def aclose(self) -> None:
        """Stop the watcher (running calls are not cancelled: their callers own them)."""
        stack, self._stack = self._stack, None
        if stack is not None and self._tg is not None:
            self._tg.cancel_scope.cancel()
            await stack.aclose()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def _watch(self) -> None:
        while True:
            if not self._active:
                self._wake = anyio.Event()
                await self._wake.wait()
                # A request needs a running row to flag, so it can wait one period like any other:
                # calls shorter than that never cost a read, and a burst of them shares the next.
                await anyio.sleep(self.poll_s)
                continue
            try:
                # Shielded: a read cut short leaves SQLAlchemy closing its connection in a task of
                # its own, which can outlive the store when the runtime stops; stop between reads.
                with anyio.CancelScope(shield=True):
                    requests = await self.executions.cancel_requests(list(self._active))
            except StoreError:
                logger.exception("could not read cancellation requests; retrying")
                requests = {}
            for execution_id, by in requests.items():
                active = self._active.get(execution_id)
                if active is not None:
                    active.cancel(by)
            await anyio.sleep(self.poll_s)

    # -- registration (the timeout layer) ---------------------------------------------------------

    def register(self, execution_id: str, user: str, run_id: str | None, scope: anyio.CancelScope) -> Active:
        """Make a running call cancellable by id; `release` it when it ends."""
        active = self._active[execution_id] = Active(execution_id, user, run_id, scope)
        self._wake.set()
        return active

    def release(self, active: Active) -> None:
        """Forget a call that ended."""
        self._active.pop(active.execution_id, None)
        active.end()

    # -- cancelling -------------------------------------------------------------------------------

    async def get(self, execution_id: str, principal: Principal) -> Execution:
        """One execution of `principal` (any, for an admin).

        Raises:
            NotFound: no such execution, or it belongs to someone else.
        """
        execution = await self.executions.get(execution_id)
        if execution is None or not principal.sees(execution.user, execution.category):
            raise NotFound(f"execution '{execution_id}' not found")
        return execution

    async def cancel(self, execution_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> Execution:
        """Cancel a running execution of `principal` (any, for an admin), in this process or another.

        Waits up to `wait_s` for it to end and returns it (still `running`, with
        `cancel_requested_by` set, if its process has not noticed yet).

        Raises:
            NotFound: no such execution, or it belongs to someone else.
            UsageError: it is not running.
        """
        by = principal.name
        if principal.categories is not None:
            # A scoped key: the category is on the record, so read it before touching the call.
            await self.get(execution_id, principal)
        active = self._active.get(execution_id)
        if active is not None and (principal.is_admin or active.user == by):
            # Running here: cancel its scope before any I/O, then wait for its final record.
            active.cancel(by)
            with anyio.move_on_after(wait_s):
                await active.wait_ended()
            return await self._until_final(execution_id, wait_s)
        execution = await self.get(execution_id, principal)
        if execution.status != ExecutionStatus.RUNNING:
            raise UsageError(
                f"execution '{execution_id}' is not running (it ended {execution.status}); "
                "only running executions can be cancelled"
            )
        if not await self.executions.request_cancel(execution_id, by, self._now()):
            return await self.executions.get(execution_id) or execution
        owner = execution.owner
        if (
            owner is not None
            and owner.host == self.owner.host
            and owner.pid != self.owner.pid
            and not pid_alive(owner.pid)
        ):
            # Nobody will notice the flag: its process is gone. Close it here.
            closed = replace(
                execution,
                status=ExecutionStatus.CANCELLED,
                ended_at=self._now(),
                reason=f"cancelled by {by}",
                duration_ms=execution.running_time_ms(self._now()),
            )
            if await self.executions.finish(closed):
                await self.recorder.audit_outcome(closed)
            return await self.executions.get(execution_id) or closed
        return await self._until_final(execution_id, wait_s) or execution

    async def _until_final(self, execution_id: str, wait_s: float) -> Execution:
        current = None
        with anyio.move_on_after(wait_s):
            while True:
                with anyio.CancelScope(shield=True):  # as in `_watch`: the wait ends between reads
                    current = await self.executions.get(execution_id)
                if current is None or current.status != ExecutionStatus.RUNNING:
                    break
                await anyio.sleep(min(self.poll_s, 0.02))
        if current is None:
            current = await self.executions.get(execution_id)
        assert current is not None
        return current

    async def cancel_run(self, run_id: str, principal: Principal, *, wait_s: float = CANCEL_WAIT_S) -> list[str]:
        """Cancel every running execution of a BUILD run (the caller's, or anyone's for an admin),
        here at once and in other processes through the store; later steps of the run end
        cancelled without running.

        Returns:
            The ids of the executions asked to cancel (empty when none was running).

        Raises:
            NotFound: a scoped key, and the run has steps outside its categories.
        """
        user = None if principal.is_admin else principal.name
        if principal.categories is not None:
            # A scoped key stops only runs whose steps all stay within its categories.
            if not all(map(principal.sees_category, await self.executions.run_categories(run_id, user=user))):
                raise NotFound(f"run '{run_id}' not found: it uses tools outside this API key's scopes")
        flagged = await self.executions.request_run_cancel(run_id, principal.name, self._now(), user=user)
        local = [a for a in self._active.values() if a.run_id == run_id and (user is None or a.user == user)]
        for active in local:
            active.cancel(principal.name)
        with anyio.move_on_after(wait_s):
            for active in local:
                await active.wait_ended()
        return sorted(set(flagged) | {a.execution_id for a in local})


__all__ = ["CANCEL_WAIT_S", "Active", "Cancellation"]
