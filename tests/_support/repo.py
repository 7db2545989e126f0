"""Where the repository and its npm peers are, and a wait that keeps a burst inside one clock
minute (rate windows are clock minutes)."""

from __future__ import annotations

import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_BIN = REPO_ROOT / "tests" / "node" / "node_modules" / ".bin"


def seconds_to_a_fresh_minute(needed_s: float) -> float:
    """How long to wait so that at least `needed_s` of the current clock minute is left: nothing
    when that much is left already, else until just past the next minute's start. Rate windows are
    clock minutes: calls on both sides of a minute's end are counted in two windows, and a burst
    across it may pass up to twice the quota."""
    left = 60.0 - time.time() % 60.0
    return 0.0 if left >= needed_s else left + 0.05
