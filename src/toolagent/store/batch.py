"""Group commit: the writes of concurrent calls share one transaction.

Callers `submit` a function of a synchronous connection; the functions queued together run one
after another in one transaction (`Database.write`), then a `seal` function writes what they
share (new rows, totals, the audit rows with one chain-head update), and the transaction
commits. Only then does each caller get its function's result back, so whatever a caller does
next (run a tool) happens after its write is durable.

When a batch closes:

- a lone write commits after one turn of the event loop, which lets the writes queued in the
  same turn join it; when the batcher's owner says no other write can come soon (`company`: for
  the recorder, no other call under way in this process and no other task ready to run) it
  commits without that turn. When other writers are under way (`crowd`: for the recorder, other
  calls between their admission and their outcome; tasks merely ready to run do not count, as the
  next step of a sequential run writes only after this write commits) and writes have lately
  come less than `idle_s` apart (a moving average of the gaps between them), the lone write
  waits for company as a batch of several does (below), but for `company_wait_s` at most: under
  a steady stream of calls each write would otherwise find only the one or two queued in the
  last turn of a busy event loop, and the commits (each with its fixed cost) would be nearly as
  many as the writes. PostgreSQL's `commit_delay` makes the same trade: a few milliseconds of
  latency for fewer, larger commits;
- when more writes are queued, the batch waits for more while they keep coming: it closes once
  `idle_s` passes with no write joining, once it holds `max_size`, or after `window_s` in all,
  whichever comes first. A group of writes queued together and followed by no others (the steps
  of a small parallel run) waits `idle_s` only; under a steady stream of calls batches grow for
  up to `window_s`, and each commit's fixed cost (a few dozen pages appended to SQLite's log, the
  round trip on PostgreSQL) is shared by more calls. Writes queued while a batch commits form the
  next batch.

There is no background task: the first caller to find no batch under way commits one, then hands
the next batch to the first caller still queued.

A write may also be deferred (`defer`): queued with no caller waiting, it joins whichever batch
commits next, and its caller later `settle`s it (committing it then if no batch took it). A
BUILD step's outcome goes this way: it commits with the next step's admission, one commit per
step instead of two. A batch never waits for more writes on account of deferred ones, and never
hands the next batch to one.

Failures are per caller. With more than one write in a batch, each runs inside a savepoint: an
exception (a limit refused, a constraint failed) rolls back that write only and is raised to its
caller, and the others commit. When the batch's transaction fails as a whole (the seal, the
commit, or a write submitted without a savepoint), each write is tried again alone in a
transaction of its own, so the error reaches only the callers whose write fails by itself. A deadlock or serialization failure (PostgreSQL, two
processes locking counter rows in different orders) rolls back everything and the batch is tried
again.

What a batch's writes share (`transaction_state()`, inside a write):

- reads: `read_once(key, read)` runs `read()` once per transaction and hands its answer to every
  later write of the batch asking for `key` (each call's re-check of its API key). Every write of
  a batch was queued before its transaction began, so each call was made before whatever a shared
  read does not see had committed: such a change is concurrent with all of them, and the next
  batch reads it;
- held rows: a write that has locked a row may keep its value in the state and register a
  `before_commit` function that writes what the later writes changed in memory, once (the limit
  counters: one statement per counter and batch instead of one per call). A write run in a
  savepoint of its own sees no state, and the state is written and emptied before it: whatever it
  does, a rollback of its savepoint undoes exactly its own statements.

Cancellation: a write once queued is committed exactly once. The wait is shielded, as a lone
transaction was: a caller cancelled while it waits still gets its write's answer, and its
cancellation at its next checkpoint, so it can close the record it opened (a `running` row).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar, cast

import anyio
import anyio.lowlevel

from ..errors import StoreError
from .db import Connection, Database, is_retryable, translate

T = TypeVar("T")

#: Longest wait of a batch with more than one write for more, by default (seconds).
DEFAULT_WINDOW_S: Final = 0.020
#: A batch waiting for more closes once no write has joined for this long (seconds).
IDLE_S: Final = 0.002
#: Longest wait of a lone write for company (seconds; never longer than the batch's window).
COMPANY_WAIT_S: Final = 0.004
#: Weight of the latest gap between two writes in their moving average.
GAP_WEIGHT: Final = 0.1
#: Most writes in one batch, by default.
DEFAULT_MAX_SIZE: Final = 64
#: Times a batch is tried again after a deadlock or serialization failure.
RETRIES: Final = 5


class TransactionState:
    """What the writes of one batch transaction share (module docstring)."""

    __slots__ = ("_flushes", "values")

    def __init__(self) -> None:
        self.values: dict[Hashable, Any] = {}
        """Shared values by key: reads, held rows."""
        self._flushes: list[Callable[[Connection], None]] = []

    def before_commit(self, flush: Callable[[Connection], None]) -> None:
        """Run `flush(conn)` once before the transaction commits (or before a savepoint write)."""
        self._flushes.append(flush)

    def flush(self, conn: Connection) -> None:
        """Write what is held, and forget every shared value."""
        flushes, self._flushes = self._flushes, []
        for flush in flushes:
            flush(conn)
        self.values.clear()


#: The state of the batch transaction under way, else None.
_STATE: ContextVar[TransactionState | None] = ContextVar("toolagent_transaction_state", default=None)


def transaction_state() -> TransactionState | None:
    """The state shared by the writes of the batch transaction under way; None outside one (and in
    a write run in a savepoint of its own)."""
    return _STATE.get()


def read_once(key: Hashable, read: Callable[[], T]) -> T:
    """`read()`, once per batch transaction for each `key` (module docstring); outside a batch,
    `read()` each time."""
    state = _STATE.get()
    if state is None:
        return read()
    if key not in state.values:
        state.values[key] = read()
    return cast(T, state.values[key])  # what read() returned for this key


#: Writes what the batch's successful writes share, before the commit: `seal(conn, results)`.
Seal = Callable[[Connection, list[Any]], None]


class Pending(Generic[T]):
    """A deferred write (`GroupCommit.defer`): pass it to `settle`."""


@dataclass(eq=False)
class _Write(Pending[T]):
    fn: Callable[..., T]
    args: tuple[Any, ...]
    savepoint: bool = True
    awaited: bool = False
    """A caller waits for it (submitted, or a deferred write being settled)."""
    wake: anyio.Event | None = None
    """Set when it is committed or handed the next batch; made only for a caller that waits
    behind another's batch (most writes lead their own)."""
    done: bool = False
    value: Any = None
    error: BaseException | None = None


@dataclass(frozen=True)
class BatchStats:
    """What a batcher did so far (for tests and benchmarks)."""

    batches: int
    """Transactions tried (a batch's writes tried again alone, or a batch retried, count again)."""
    writes: int
    """Writes they held."""
    largest: int
    """The largest batch."""


class GroupCommit:
    """Batches `submit`ted writes into shared transactions; see the module docstring."""

    def __init__(
        self,
        db: Database,
        *,
        window_s: float = DEFAULT_WINDOW_S,
        max_size: int = DEFAULT_MAX_SIZE,
        seal: Seal | None = None,
        idle_s: float = IDLE_S,
        company: Callable[[], bool] | None = None,
        crowd: Callable[[], bool] | None = None,
        company_wait_s: float = COMPANY_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        db: The store.
        window_s: Longest wait for more writes once two are queued (0: never wait).
        max_size: Most writes per transaction.
        seal: Run once per batch after the writes, with their results (not their errors).
        idle_s: A waiting batch closes once no write has joined for this long; a lone write
            waits for company while writes have lately come less than this far apart.
        company: Whether another write may be queued soon; when it answers False, a lone
            write commits without first letting the event loop run the others' tasks, and
            without waiting for company (None: always wait that one turn).
        crowd: Whether other writers are under way, whose writes a lone write may wait for
            (with writes coming less than `idle_s` apart); None: a lone write never waits.
        company_wait_s: Longest wait of a lone write for company (never longer than `window_s`).
        clock: Seconds, for the gaps between writes (tests drive it by hand).
        """
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self.db = db
        self.window_s = max(0.0, window_s)
        self.max_size = max_size
        self.seal = seal
        self.idle_s = idle_s
        self.company = company
        self.crowd = crowd
        self.company_wait_s = company_wait_s
        self.clock = clock
        self._queue: deque[_Write[Any]] = deque()
        self._last_arrival: float | None = None
        self._gap_s = float("inf")
        self._leading = False
        self._full: anyio.Event | None = None
        self._batches = self._writes = self._largest = 0

    @property
    def arrival_gap_s(self) -> float:
        """The moving average of the gaps between writes (infinite before the second write)."""
        return self._gap_s

    @property
    def stats(self) -> BatchStats:
        """Batches and writes so far."""
        return BatchStats(self._batches, self._writes, self._largest)

    async def submit(self, fn: Callable[..., T], *args: Any, savepoint: bool = True) -> T:
        """Run `fn(conn, *args)` in the next batch's transaction; returns its result once committed.

        Args:
            fn: The write; it must have no effect outside the connection (a batch may run it again).
            args: Its arguments after the connection.
            savepoint: Run it in a savepoint of its own, so that when it raises only its own
                statements roll back. Without one (a write of a single statement, or none), its
                failure fails the batch, whose writes are then tried alone: cheaper when that is rare.

        Raises:
            Whatever `fn` raised (its write was rolled back), or StoreError: the database failed.
        """
        return await self.settle(self.defer(fn, *args, savepoint=savepoint))

    def defer(self, fn: Callable[..., T], *args: Any, savepoint: bool = True) -> Pending[T]:
        """Queue `fn(conn, *args)` for the next batch without waiting for it (`submit`'s arguments).

        The write joins whichever batch the next caller commits, or is committed by `settle`:
        the caller must settle it (a write nobody settles and no later batch takes is never run).
        A batch does not wait for more writes on account of a deferred one.
        """
        write: _Write[T] = _Write(fn, args, savepoint)
        now = self.clock()
        if self._last_arrival is not None:
            gap = now - self._last_arrival
            self._gap_s = gap if self._gap_s == float("inf") else self._gap_s + GAP_WEIGHT * (gap - self._gap_s)
        self._last_arrival = now
        self._queue.append(write)
        if self._full is not None and len(self._queue) >= self.max_size:
            self._full.set()
        return write

    async def settle(self, write: Pending[T]) -> T:
        """Wait until a deferred write is committed (committing it when no batch has taken it).

        Raises:
            What `submit` raises.
        """
        assert isinstance(write, _Write)
        write.awaited = True
        with anyio.CancelScope(shield=True):
            if self._leading and not write.done:
                if write.wake is None:
                    write.wake = anyio.Event()
                await write.wake.wait()  # committed, or handed the next batch
            if not write.done:
                await self._lead(write)
        if write.error is not None:
            raise write.error
        return cast(T, write.value)  # done without an error: fn's result

    async def _lead(self, own: _Write[Any]) -> None:
        """Commit one batch (`own`, this caller's write, among them), then hand over to the next in line."""
        self._leading = True
        batch: list[_Write[Any]] = []
        try:
            company = self.company is None or self.company()
            if company:
                await anyio.lowlevel.checkpoint()
            if len(self._queue) < self.max_size and self.window_s > 0:
                if len(self._queue) > 1 and sum(w.awaited for w in self._queue) > 1:
                    await self._gather(self.window_s)
                elif company and self._gap_s < self.idle_s and self.crowd is not None and self.crowd():
                    await self._gather(min(self.window_s, self.company_wait_s))
            while self._queue and len(batch) < self.max_size:
                batch.append(self._queue.popleft())
            if not any(w is own for w in batch):  # behind a full batch of deferred writes
                self._queue.remove(own)
                batch.append(own)
            await self._commit(batch)
        except BaseException:
            for write in batch:  # interrupted before its outcome was known: never a silent None
                write.error = write.error or StoreError("the store write was interrupted; its outcome is unknown")
            raise
        finally:
            for write in batch:
                write.done = True
                if write.wake is not None:
                    write.wake.set()
            # The first write someone waits for leads the next batch (a deferred write waits for
            # its settler, or for the next batch that takes it).
            heir = next((w for w in self._queue if w.awaited), None)
            if heir is not None:
                # A write left in the queue that someone awaits made its event before waiting
                # (`settle`): a caller that found no batch under way led its own and left the queue.
                assert heir.wake is not None
                heir.wake.set()
            else:
                self._leading = False

    async def _gather(self, window_s: float) -> None:
        """Wait for more writes while they keep coming, for `window_s` at most (module docstring)."""
        self._full = anyio.Event()
        deadline = anyio.current_time() + window_s
        try:
            while True:
                seen = len(self._queue)
                left = deadline - anyio.current_time()
                with anyio.move_on_after(min(self.idle_s, left)):
                    await self._full.wait()
                if self._full.is_set() or len(self._queue) == seen or left <= self.idle_s:
                    return
        finally:
            self._full = None

    async def _commit(self, batch: list[_Write[Any]]) -> None:
        self._writes += len(batch)
        self._largest = max(self._largest, len(batch))
        try:
            await self._attempt(batch)
        except Exception as exc:
            if len(batch) == 1:
                batch[0].error = exc
                return
            # The shared part or the commit failed: nothing was written. Alone, each write
            # fails (or not) on its own account.
            for write in batch:
                try:
                    await self._attempt([write])
                except Exception as alone:
                    write.error = alone

    async def _attempt(self, batch: list[_Write[Any]]) -> None:
        for attempt in range(RETRIES + 1):
            for write in batch:
                write.value, write.error = None, None
            self._batches += 1
            try:
                await self.db.write(self._transaction, batch)
                return
            except StoreError as exc:
                if attempt == RETRIES or not is_retryable(exc):
                    raise

    def _transaction(self, conn: Connection, batch: Sequence[_Write[Any]]) -> None:
        state = TransactionState()
        token = _STATE.set(state)
        try:
            self._writes_and_seal(conn, batch, state)
        finally:
            _STATE.reset(token)

    def _writes_and_seal(self, conn: Connection, batch: Sequence[_Write[Any]], state: TransactionState) -> None:
        if len(batch) == 1:
            write = batch[0]
            write.value = write.fn(conn, *write.args)  # raising rolls the transaction back
        else:
            for write in batch:
                if not write.savepoint:
                    write.value = write.fn(conn, *write.args)  # raising fails the batch (module docstring)
                    continue
                state.flush(conn)
                token = _STATE.set(None)
                try:
                    with conn.begin_nested():
                        write.value = write.fn(conn, *write.args)
                except Exception as exc:
                    error = translate(exc, self.db.dialect)
                    if is_retryable(error):
                        raise error from exc  # the whole transaction is lost: try the batch again
                    write.error = error
                finally:
                    _STATE.reset(token)
        state.flush(conn)
        if self.seal is not None:
            self.seal(conn, [w.value for w in batch if w.error is None])


__all__ = [
    "COMPANY_WAIT_S",
    "DEFAULT_MAX_SIZE",
    "DEFAULT_WINDOW_S",
    "GAP_WEIGHT",
    "IDLE_S",
    "BatchStats",
    "GroupCommit",
    "Pending",
    "Seal",
    "TransactionState",
    "read_once",
    "transaction_state",
]
