"""How long `toolagent tools call` takes to exit after a call timed out: from the error line on
stderr to the process's exit, with the stdio server still busy in the abandoned call.

A server that ignores a call's cancellation keeps running it; the CLI has printed its error at
the deadline, and what follows (closing the connection, stopping the server, the interpreter's
own shutdown) is what a user waits for before the prompt comes back. Runs the command N times as
fresh processes against `bench/bench_server.py`'s `sleep_0` (10 s, timeout 1 s) and prints the
median and the slowest seconds from error to exit, and the whole command's median.

Run: .venv/bin/python bench/timeout_exit.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def one_run(work: Path) -> tuple[float, float]:
    """(seconds from the error line to exit, seconds for the whole command)."""
    command = [
        *(sys.executable, "-m", "toolagent.cli"),
        *("--db", str(work / "store.db"), "--servers", str(work / "mcp.json")),
        *("tools", "call", "bench/sleep_0", "--args", json.dumps({"ms": 10_000}), "--timeout", "1000"),
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=work)
    assert proc.stderr is not None
    error_at = None
    for line in proc.stderr:
        if error_at is None and line.startswith("error:") and "timeout" in line:
            error_at = time.perf_counter()
    code = proc.wait()
    ended = time.perf_counter()
    if error_at is None or code != 1:
        raise SystemExit(f"expected a timeout (exit 1) and its error line, got exit {code}")
    return ended - error_at, ended - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        server = {"command": sys.executable, "args": [str(REPO / "bench" / "bench_server.py"), "stdio", "0", "1"]}
        (work / "mcp.json").write_text(json.dumps({"mcpServers": {"bench": {**server, "risk": "safe"}}}))
        one_run(work)  # warm-up: the store is created, the file cache is warm
        runs = [one_run(work) for _ in range(args.runs)]
    after_error = [a for a, _ in runs]
    whole = [w for _, w in runs]
    print(f"runs: {args.runs}")
    print(f"error -> exit  median {statistics.median(after_error):.3f} s   slowest {max(after_error):.3f} s")
    print(f"whole command  median {statistics.median(whole):.3f} s")


if __name__ == "__main__":
    main()
