"""What each piece of a governed BUILD step costs where it runs, by leaving it out.

A piece's cost measured alone in a loop is two to four times too small: inside a step it runs
between the MCP SDK, SQLAlchemy and anyio, with cold caches. This script measures it in place.
In one process, over the benchmark server (bench/bench_server.py, stdio) and a temporary SQLite
store, it runs one-step BUILD runs through the whole tool stack (as `bench/overhead.py` row 4):
each piece's runs alternate between with the piece and without it (its code swapped for a
stand-in that does nothing, or the cheapest thing that keeps the step going), going round the
pieces run by run, in a new order each round, so that the machine's drift falls on all of them
alike. It prints each side's median step time and their difference, the piece's cost, also as a
share of the step. The `null` row swaps nothing: what the cost of nothing comes out at. The
medians of a few thousand runs still move by about 10 µs from one run of the script to the next
on a 2-core VM (a step's times spread widely): read rows that differ by less as equal.

Leaving a piece out breaks what it is for (no audit row, no timeout): the store is thrown away,
and the figures say what each piece costs, not that it could go.

Run: .venv/bin/python bench/step_pieces.py [--runs N] [--only NAME,...]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from overhead import HERE, agent

from toolagent._heap import tune_collector
from toolagent.engine import audit as audit_module
from toolagent.engine.audit import AuditLog
from toolagent.engine.config import EngineConfig
from toolagent.engine.events import EventBus
from toolagent.mcp.config import ServersConfig
from toolagent.mcp.pool import ServerPool
from toolagent.runs import plan_build
from toolagent.runs.writer import StepWriter
from toolagent.runtime import Runtime
from toolagent.store import open_store
from toolagent.store.executions import ExecutionStore
from toolagent.tools import recorded as recorded_module
from toolagent.tools.base import CallContext
from toolagent.tools.cancellation import Cancellation
from toolagent.tools.timeout import TimeoutSource


@dataclass
class Piece:
    """Something a governed step does, and how to leave it out: each `(owner, attr, stand_in)` of
    `swaps` puts `stand_in` in place of `owner.attr`."""

    name: str
    what: str
    swaps: tuple[tuple[Any, str, Any], ...] = ()

    def __post_init__(self) -> None:
        self.originals = [getattr(owner, attr) for owner, attr, _ in self.swaps]

    def leave_out(self, out: bool) -> None:
        for (owner, attr, stand_in), original in zip(self.swaps, self.originals, strict=True):
            setattr(owner, attr, stand_in if out else original)


async def _inner_call(self: TimeoutSource, call: Any, ctx: Any) -> Any:
    return await self.inner.call_tool(call, ctx)


async def _no_event(self: EventBus, event: Any) -> None:
    return None


def _pieces() -> list[Piece]:
    nothing: Callable[..., None] = lambda *args: None  # noqa: E731
    return [
        Piece("null", "nothing left out: how far apart two identical halves land"),
        Piece(
            "audit-row",
            "the admission's audit row (spelling, hash, insert, chain head)",
            ((AuditLog, "append_many_in", lambda self, conn, entries: []),),
        ),
        Piece(
            "audit-hash",
            "the audit row's hash alone",
            ((audit_module, "row_hash", lambda fields, prev, key=None: "0" * 64),),
        ),
        Piece(
            "timeout",
            "the timeout layer: its cancel scope with a deadline, its registration for cancel by id",
            ((TimeoutSource, "call_tool", _inner_call),),
        ),
        Piece(
            "cancel-registration",
            "the registration for cancel by id alone",
            ((Cancellation, "register", nothing), (Cancellation, "release", nothing)),
        ),
        Piece(
            "run-cancel-check",
            "the admission's read of its run's cancellation",
            ((ExecutionStore, "run_cancelled_by", lambda self, conn, run_id: None),),
        ),
        Piece("step-snapshots", "the step's hand-overs to the step writer", ((StepWriter, "put", nothing),)),
        Piece(
            "result-bound",
            "bounding the stored result",
            ((recorded_module, "bound_result", lambda result, cap: result),),
        ),
        Piece("events", "the lifecycle events", ((EventBus, "emit", _no_event),)),
    ]


async def main(runs: int, only: set[str] | None) -> None:
    """Measure each piece (or those in `only`) over `runs` runs, half of them without it."""
    pieces = [p for p in _pieces() if only is None or p.name in only]
    if only is not None and len(pieces) < len(only):
        raise SystemExit(f"unknown piece in --only; the pieces are {', '.join(p.name for p in _pieces())}")
    server = {"command": sys.executable, "args": [str(HERE / "bench_server.py"), "stdio", "0", "100"]}
    config = ServersConfig.from_data({"mcpServers": {"bench": server}})
    unlimited = EngineConfig.from_data({"plans": {"enterprise": {"rate_per_minute": None}}})
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            open_store(f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}") as store,
            ServerPool(config) as pool,
            Runtime(store, config=unlimited, pool=pool) as runtime,
        ):
            me = await runtime.principals.add_user("bench", level="admin", plan="enterprise")
            await runtime.catalogue.refresh()
            governed = runtime.runner(CallContext(me))
            one = plan_build(agent(["bench/echo_1"], {"bench/echo_1": {"text": "hello"}}))
            for _ in range(50):
                await governed.run(one)
            tune_collector()
            print(
                f"{'piece':<20} {'with':>10} {'without':>10} {'cost':>9} {'':>6}   "
                f"({runs} one-step runs per piece, half without it)"
            )
            # Round-robin over the pieces, so that the machine's drift (its speed changes by the
            # second on a shared VM) falls on every piece and on both halves alike, in a new order
            # each round, so that no piece always follows the same other one.
            times = {p.name: {True: [], False: []} for p in pieces}
            order = random.Random(0)
            for i in range(runs):
                out = i % 2 == 1
                for piece in order.sample(pieces, len(pieces)):
                    piece.leave_out(out)
                    try:
                        outcome = await governed.run(one)
                    finally:
                        piece.leave_out(False)
                    times[piece.name][out].append((outcome.steps[0].duration_ms or 0) * 1000)
            for piece in pieces:
                with_, without = statistics.median(times[piece.name][False]), statistics.median(times[piece.name][True])
                cost = with_ - without
                print(
                    f"{piece.name:<20} {with_:8.1f} us {without:8.1f} us {cost:+7.1f} us "
                    f"{cost / with_:+6.1%}   {piece.what}"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4000, help="runs per piece, half without it (default 4000)")
    parser.add_argument("--only", help="comma-separated piece names (default: all)")
    ns = parser.parse_args()
    anyio.run(main, ns.runs, set(ns.only.split(",")) if ns.only else None)
