"""Instructions per governed tool call, counted by callgrind: a figure the machine's load does not move.

On a small shared VM the speed of the machine drifts by a third within a minute or two, so two
timings of the same code can differ by more than a change to the hot path saves. Callgrind counts
the instructions a process executes, the same from run to run within about 0.6% (a checkpoint of
SQLite's log falls inside the difference of two runs or not), so it tells apart versions of the
call path that differ by a few percent.

Runs, each under `valgrind --tool=callgrind` in a child process: C calls, then C + D calls, of a
tool that answers at once (a `StubToolSource` in process: no MCP transport) through the runtime's
layers (gate, limits, execution record and audit on a temporary SQLite store, timeout, retries,
SQL guard, schema check), from `--concurrency` tasks; the difference divided by D is one call's
instructions, the start-up and warm-up left out. With `--bare`, the same through the stack
without its governing layers, so the difference of the two is what governing a call executes.

Callgrind replaces the C library's `memcpy` and friends by simpler ones, so work that copies a
lot (JSON, SQLite's pages) counts more than it costs; compare versions of the code with it, not
parts of one call with each other.

Run: .venv/bin/python bench/call_instructions.py [--calls C] [--delta D] [--concurrency N] [--bare]
Needs valgrind (apt-get install valgrind). Each run takes about half a minute.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

#: Calls made before counting starts in each child (the first calls compile statements).
WARMUP_CALLS = 200


async def calls(count: int, concurrency: int, governed: bool) -> None:
    """`count` calls of an instant stub tool from `concurrency` tasks (the child's work)."""
    from toolagent.engine.config import EngineConfig
    from toolagent.runtime import Runtime
    from toolagent.store import open_store
    from toolagent.testing import StubToolSource
    from toolagent.tools.base import CallContext
    from toolagent.tools.stack import ToolStack, build_tool_stack

    with tempfile.TemporaryDirectory() as tmp:
        config = EngineConfig.from_data({"plans": {"enterprise": {"rate_per_minute": 100_000_000}}})
        async with (
            open_store(f"sqlite+aiosqlite:///{Path(tmp) / 'calls.db'}") as store,
            Runtime(store, config=config) as runtime,
        ):
            me = await runtime.principals.add_user("bench", level="execute_basic", plan="enterprise")
            stub = StubToolSource()
            stub.add(
                "bench/echo",
                lambda a: {"echo": a.get("text")},
                input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
            )
            layers = (
                build_tool_stack(
                    stub, recorder=runtime.recorder, limits=runtime.limits, cancellation=runtime.cancellation
                )
                if governed
                else build_tool_stack(stub)
            )
            stack = ToolStack(layers)
            entry = await stack.resolve("bench/echo")
            ctx = CallContext(me)

            async def loop(task: int, n: int) -> None:
                for i in range(n):
                    outcome = await stack.call(entry, {"text": f"hello {task}/{i}"}, ctx)
                    if not outcome.ok:
                        raise SystemExit(f"a call failed: {outcome.error}")

            await loop(0, WARMUP_CALLS)
            async with anyio.create_task_group() as tg:
                for task in range(concurrency):
                    tg.start_soon(loop, task, count // concurrency)


def counted(count: int, concurrency: int, governed: bool) -> int:
    """Instructions a child making `count` calls executes, start-up included."""
    argv = [sys.executable, __file__, "--child", str(count), "--concurrency", str(concurrency)]
    if not governed:
        argv.append("--bare")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
            capture_output=True,
            text=True,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(
            f"the child failed under callgrind (exit {done.returncode}):\n{done.stdout[-500:]}{done.stderr[-1500:]}"
        )
    return int(found.group(1))


def main() -> None:
    """Count, and print one call's instructions."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500, help="calls of the shorter run (default 500)")
    parser.add_argument("--delta", type=int, default=1000, help="calls the longer run makes more (default 1000)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=10,
        help="tasks calling at once (default 10: the group commit's batches hold about 8 writes)",
    )
    parser.add_argument("--bare", action="store_true", help="also count the stack without its governing layers")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        anyio.run(calls, args.child, args.concurrency, not args.bare)
        return
    if args.calls % args.concurrency or args.delta % args.concurrency:
        parser.error("--calls and --delta must be multiples of --concurrency")
    if shutil.which("valgrind") is None:
        raise SystemExit("bench/call_instructions.py needs valgrind: apt-get install valgrind")
    kinds = [("governed", True)] + ([("bare", False)] if args.bare else [])
    per_call: dict[str, float] = {}
    for name, governed in kinds:
        short = counted(args.calls, args.concurrency, governed)
        long = counted(args.calls + args.delta, args.concurrency, governed)
        per_call[name] = (long - short) / args.delta
        print(
            f"{name:<9} {per_call[name]:12,.0f} instructions a call  ({args.concurrency} tasks; "
            f"{short:,} for {args.calls} calls, {long:,} for {args.calls + args.delta})",
            flush=True,
        )
    if args.bare:
        print(f"governing a call: {per_call['governed'] - per_call['bare']:,.0f} instructions")


if __name__ == "__main__":
    main()
