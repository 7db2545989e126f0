"""How long the CLI takes to start and finish a command that needs neither MCP nor the store.

Runs each command as a fresh process N times (after one warm-up run, so the file cache is warm)
and prints the median and the fastest wall time, with the bare interpreter's start-up for
reference. Target: each command under 0.3 s (median).

Run: .venv/bin/python bench/startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 0.3
COMMANDS = {
    "python -c pass (reference)": [sys.executable, "-c", "pass"],
    "toolagent --help": [sys.executable, "-m", "toolagent.cli", "--help"],
    "toolagent sql check": [sys.executable, "-m", "toolagent.cli", "sql", "check", "SELECT id FROM users LIMIT 1"],
    "toolagent agents validate": [sys.executable, "-m", "toolagent.cli", "agents", "validate",
                                  str(REPO / "agents" / "supabase-agent.yaml")],
}


def wall_times(argv: list[str], runs: int) -> list[float]:
    """Wall time of `runs` runs of `argv` (plus one warm-up that is not counted)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "100"}
    times = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if i:
            times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    """Print one line per command: median, fastest, and whether the median meets the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per command (default 15)")
    args = parser.parse_args()
    print(f"{'command':<30} {'median s':>9} {'fastest s':>10}  target < {TARGET_S} s (median)")
    for name, argv in COMMANDS.items():
        times = wall_times(argv, args.runs)
        median = statistics.median(times)
        verdict = "" if "reference" in name else ("met" if median < TARGET_S else "NOT met")
        print(f"{name:<30} {median:>9.3f} {min(times):>10.3f}  {verdict}")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
