"""Wall-clock time per stage of `POST /api/tools/execute`, patched into the API server process by
bench/api_load.py --timings (nothing under src/ imports this).

Each stage's total wall time includes waiting: for the store's writer thread (one on SQLite), a
pooled database connection, or the event loop. The stages named "CPU" are the CPU time of the
thread that ran them instead (the store's transactions on the kept SQLite connection, and the
driver's COMMIT).
SIGUSR1 clears the figures; SIGUSR2 writes them as JSON to the file named by BENCH_TIMINGS.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

#: stage -> [calls, total wall seconds]
STATS: dict[str, list[float]] = {}


def _add(stage: str, seconds: float) -> None:
    entry = STATS.setdefault(stage, [0, 0.0])
    entry[0] += 1
    entry[1] += seconds


def _timed(owner: Any, attr: str, stage: str) -> None:
    inner: Callable[..., Any] = getattr(owner, attr)

    @functools.wraps(inner)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await inner(*args, **kwargs)
        finally:
            _add(stage, time.perf_counter() - t0)

    setattr(owner, attr, wrapper)


def install() -> None:
    """Wrap the stages and the signal handlers."""
    import sqlalchemy as sa

    from toolagent.api import procedures, routes_tools
    from toolagent.engine.limits import Limits
    from toolagent.engine.principals import Principals
    from toolagent.mcp.pool import ServerPool
    from toolagent.store.batch import GroupCommit
    from toolagent.store.db import Database
    from toolagent.tools.records import Recorder
    from toolagent.tools.stack import ToolStack

    _timed(routes_tools, "respond", "0 whole procedure (after auth)")
    _timed(Principals, "authenticate_key", "1 authenticate (key lookup)")
    _timed(procedures, "tool_entry", "2 tool_entry")
    _timed(ToolStack, "call", "3 tool stack call (total)")
    _timed(Recorder, "admit", "3b  admit: key, limits, insert running, audit")
    _timed(ServerPool, "call", "3d  MCP call (pool.call)")
    _timed(Recorder, "finish", "3e  finish: update row, totals, audit, event")
    _timed(Limits, "usage", "4 rate-limit headers (usage read)")
    _timed(Database, "write", "6 db.write: waits + transaction")
    original_transaction = Database._transaction

    def transaction(self: Database, engine: Any, fn: Any, args: Any) -> Any:
        t0 = time.perf_counter()
        stage = "6.  transaction inline" if engine is self._inline_engine else "6.  transaction on a thread"
        try:
            return original_transaction(self, engine, fn, args)
        finally:
            _add(stage, time.perf_counter() - t0)

    Database._transaction = transaction  # type: ignore[method-assign]
    original_held = Database._held_transaction

    def held_transaction(self: Database, kind: Any, fn: Any, args: Any) -> Any:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return original_held(self, kind, fn, args)
        finally:
            _add(f"6.  transaction on the kept {kind} connection", time.perf_counter() - t0)
            # Inline on the loop's thread: its CPU time, against the wall time above, says how
            # much of that was work and how much waiting (the disk, or the other processes).
            _add(f"6.  transaction on the kept {kind} connection, CPU", time.thread_time() - c0)

    Database._held_transaction = held_transaction  # type: ignore[method-assign]
    original_commit = sa.engine.default.DefaultDialect.do_commit

    def do_commit(self: Any, dbapi_connection: Any) -> None:
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            original_commit(self, dbapi_connection)
        finally:
            _add("8 COMMIT (the driver's)", time.perf_counter() - t0)
            _add("8 COMMIT (the driver's), CPU of its thread", time.thread_time() - c0)

    sa.engine.default.DefaultDialect.do_commit = do_commit  # type: ignore[method-assign]
    # Its count per execute tells the batches' size: two writes per call (admission, outcome).
    _timed(GroupCommit, "_commit", "7 group-commit batch (writes, commit)")
    original_begin = Database.begin

    @contextlib.asynccontextmanager
    async def begin(self: Database) -> AsyncIterator[Any]:
        t0 = time.perf_counter()
        async with original_begin(self) as conn:
            _add("5 db: connection + BEGIN wait", time.perf_counter() - t0)
            t1 = time.perf_counter()
            yield conn
            t2 = time.perf_counter()
        _add("5 db: transaction body", t2 - t1)
        _add("5 db: COMMIT", time.perf_counter() - t2)

    Database.begin = begin  # type: ignore[method-assign]

    def dump(*_: Any) -> None:
        with open(os.environ["BENCH_TIMINGS"], "w", encoding="utf-8") as fh:
            json.dump(STATS, fh)

    signal.signal(signal.SIGUSR1, lambda *_: STATS.clear())
    signal.signal(signal.SIGUSR2, dump)
