"""The garbage collector, set for a process that serves calls for a long time.

A server process builds a few hundred thousand long-lived objects as it starts (the MCP SDK's and
pydantic's models, SQLAlchemy's tables and caches, the tool catalogue). Every full collection
walks all of them, tens of milliseconds each time, charged to whichever call happens to allocate
at that moment. Frozen after one collection (`gc.freeze`), they are skipped by later passes;
whatever is made afterwards is collected as usual.

Then the young generation. Python collects it every 700 net container allocations. A governed call
allocates a few thousand, and with a hundred calls in flight each pass walks their live state, which
moves on to the older generations and is walked again there, though reference counting frees nearly
all of it a few milliseconds later. Under `bench/api_load.py`'s 100 clients the API server spent
0.65-0.7 s of CPU in the collector in a run, start-up aside (about 1,400 young passes, 130 middle
ones at about 2 ms, a dozen full ones at about 27 ms), and 0.2 s with a young pass every 10,000
allocations (`GEN0_THRESHOLD`: about 60 passes at 2 ms, five middle ones at 13 ms, no full one):
about a tenth of a millisecond less per call. Reference cycles wait a little longer to be freed.
`TOOLAGENT_GC_THRESHOLD` sets another count (700: Python's own).

Only the programs that own their process do this (`toolagent serve`, `toolagent worker`), once
they are ready: the library entry points never do, as it would change an embedding program's
collector too.
"""

from __future__ import annotations

import gc

#: Net container allocations between two collections of the young generation, in a server.
GEN0_THRESHOLD = 10_000


def tune_collector(gen0_threshold: int | None = None) -> int:
    """Collect, move every object alive now out of the collector's reach, and collect the young
    generation every `gen0_threshold` allocations (default `GEN0_THRESHOLD`; `serve` and `worker`
    pass `TOOLAGENT_GC_THRESHOLD`); the older generations keep their ratios. Returns how many
    objects were frozen.
    """
    if gen0_threshold is None:
        gen0_threshold = GEN0_THRESHOLD
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(gen0_threshold, gen1, gen2)
    return gc.get_freeze_count()


__all__ = ["GEN0_THRESHOLD", "tune_collector"]
