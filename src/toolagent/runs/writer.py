"""Write-behind of step records: steps never wait for the database, and nothing is lost.

Each step hands its latest snapshot to the writer and goes on; a background task wakes every
`FLUSH_INTERVAL_S` and commits every pending snapshot in one transaction, so a run of 100 quick
steps costs a handful of commits instead of 200, and a record is at most that late. Handing over
a snapshot does not wake the task: woken at once, it would run in the next turn of the event
loop, which is where a step's admission lets concurrent writes join its batch, and the step
would wait for it. The price is a wake per interval while the run lasts, idle or not: about
10 µs each here, 0.2 ms of CPU a second per running run. `close()` (called in a shield when the
run ends, whatever ended it) flushes what is left before the run's final record is written.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.abc

from ..store import Store
from ..tools.bounds import DEFAULT_MAX_RESULT_BYTES, bound_result_json

#: Longest delay between a step's change and its commit.
FLUSH_INTERVAL_S = 0.05


class StepWriter:
    """Background, batching writer of one run's step records."""

    def __init__(self, store: Store, run_id: str, *, flush_interval_s: float = FLUSH_INTERVAL_S,
                 max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.store = store
        self.max_result_bytes = max_result_bytes
        self.flush_interval_s = flush_interval_s
        self.run_id = run_id
        self._pending: dict[int, dict[str, Any]] = {}
        self._stop = anyio.CancelScope()
        self._done = anyio.Event()

    def put(self, position: int, values: dict[str, Any]) -> None:
        """Queue the latest state of a step (a later snapshot replaces an unwritten one); its
        result is stored bounded to `max_result_bytes`, as an execution's is."""
        if values.get("result") is not None:
            values = {**values, "result": bound_result_json(values["result"], self.max_result_bytes)}
        self._pending[position] = {"position": position, **values}

    async def _flush(self) -> None:
        batch, self._pending = self._pending, {}
        if batch:
            await self.store.runs.update_steps(self.run_id, list(batch.values()))

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
