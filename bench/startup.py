"""How long the CLI takes to start and finish a command that needs neither MCP nor the store, and
one that opens the store (no target: what every listing, history or user command costs).

Runs each command as a fresh process N times (after one warm-up run, so the file cache is warm)
and prints the median and the fastest wall time, with the bare interpreter's start-up for
reference. Target: each command under 0.3 s (median).

With `--instructions`, each command instead runs once under valgrind's callgrind and the bench
prints the instructions it executed: a count that does not change with the machine's load, for
comparing two versions on a busy machine (the seconds it stands for are the count over the
reference command's instructions per second, measured idle).

Run: .venv/bin/python bench/startup.py [--runs N] [--instructions]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.3
COMMANDS = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "toolagent --help": [sys.executable, "-m", "toolagent.cli", "--help"],
    "toolagent sql check": [sys.executable, "-m", "toolagent.cli", "sql", "check", "SELECT id FROM users LIMIT 1"],
    "toolagent agents validate": [
        sys.executable,
        "-m",
        "toolagent.cli",
        "agents",
        "validate",
        str(REPO / "agents" / "supabase-agent.yaml"),
    ],
}
#: Opens a SQLite store (made by the warm-up run) but calls no tool: no target.
STORE_COMMAND = "toolagent runs list (store)"
COMMANDS[STORE_COMMAND] = [sys.executable, "-m", "toolagent.cli", "--json", "runs", "list"]


def _env(store: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "COLUMNS": "100",
        "TOOLAGENT_DATABASE_URL": f"sqlite+aiosqlite:///{store}",
    }


def wall_times(argv: list[str], runs: int, store: Path) -> list[float]:
    """Wall time of `runs` runs of `argv` (plus one warm-up that is not counted)."""
    env = _env(store)
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if i:
            times.append(time.perf_counter() - t0)
    return times


def instructions(argv: list[str], store: Path) -> int:
    """Instructions `argv` executes, counted by callgrind (one run after a warm-up; needs valgrind)."""
    env = _env(store)
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *argv],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind gave no count for {argv}: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    """Print one line per command: median, fastest, and whether the median meets the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per command (default 15)")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under valgrind instead of timing (load-independent)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        measure(args, Path(tmp) / "store.db")


def measure(args: argparse.Namespace, store: Path) -> None:
    """Print the table (module docstring)."""
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
        print(f"{'command':<30} {'instructions':>14}")
        for name, argv in COMMANDS.items():
            print(f"{name:<30} {instructions(argv, store):>14,}")
        return
    print(f"{'command':<30} {'median s':>9} {'fastest s':>10}  target < {TARGET_S} s (median)")
    for name, argv in COMMANDS.items():
        times = wall_times(argv, args.runs, store)
        median = statistics.median(times)
        verdict = (
            "" if name in ("python -c pass (reference)", STORE_COMMAND) else ("met" if median < TARGET_S else "NOT met")
        )
        print(f"{name:<30} {median:>9.3f} {min(times):>10.3f}  {verdict}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
