"""Write-behind of step records: steps never wait for the database, and nothing is lost.

Each step hands itself to the writer and goes on; a background task wakes every
`FLUSH_INTERVAL_S` and commits every pending step in one transaction, so a run of 100 quick
steps costs a handful of commits instead of 200, and a record is at most that late. A step's
values (its bounded result among them) are taken when it is written, not when it is handed
over: a step that changes again before the write costs one snapshot, and none on its own time.
Handing a step over does not wake the task: woken at once, it would run in the next turn of the
event loop, which is where a step's admission lets concurrent writes join its batch, and the
step would wait for it. The price is a wake per interval while the run lasts, idle or not: about
10 µs each here, 0.2 ms of CPU a second per running run. `close()` (called in a shield when the
run ends, whatever ended it) flushes what is left before the run's final record is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import anyio.abc

from ..model.bounds import DEFAULT_MAX_RESULT_BYTES, bound_result_json
from ..store import Store

#: Longest delay between a step's change and its commit.
FLUSH_INTERVAL_S = 0.05


class StepWriter:
    """Background, batching writer of one run's step records."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        snapshot: Callable[[Any], Mapping[str, Any]] = dict,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        """Args:
        store: Where the step records go.
        run_id: The run whose steps these are.
        snapshot: A step's column values as they are now (by default the step is a mapping of them).
        flush_interval_s: How long a handed-over step may wait for its write.
        max_result_bytes: Largest stored result (bytes of compact JSON), as an execution's.
        """
        self.store = store
        self.snapshot = snapshot
        self.max_result_bytes = max_result_bytes
        self.flush_interval_s = flush_interval_s
        self.run_id = run_id
        self._pending: dict[int, Any] = {}
        self._stop = anyio.CancelScope()
        self._done = anyio.Event()

    def put(self, position: int, step: Any) -> None:
        """Queue the step at `position` for the next write (replacing one still unwritten there);
        the write stores `snapshot(step)` as it is then, its result bounded to `max_result_bytes`."""
        self._pending[position] = step

    def _row(self, position: int, step: Any) -> dict[str, Any]:
        values = self.snapshot(step)
        if values.get("result") is not None:
            values = {**values, "result": bound_result_json(values["result"], self.max_result_bytes)}
        return {"position": position, **values}

    async def _flush(self) -> None:
        batch, self._pending = self._pending, {}
        if batch:
            # Every snapshot is taken before the first await: the write holds one moment's state.
            rows = [self._row(position, step) for position, step in batch.items()]
            await self.store.runs.update_steps(self.run_id, rows)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """The writer task: every `flush_interval_s`, write what is pending, until closed."""
        try:
            with self._stop:
                task_status.started()
                while True:
                    # It wakes on every interval while its run lasts, idle or not: a bare sleep is
                    # the cheapest wait to wake from.
                    await anyio.sleep(self.flush_interval_s)
                    if self._pending:
                        with anyio.CancelScope(shield=True):
                            await self._flush()
        finally:
            self._done.set()

    async def close(self) -> None:
        """Stop the task and write whatever is still pending. Call in a shield."""
        self._stop.cancel()
        await self._done.wait()
        await self._flush()
