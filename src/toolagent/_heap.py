"""Start-up objects kept out of the garbage collector's full passes.

A server process builds a few hundred thousand long-lived objects as it starts (the MCP SDK's and
pydantic's models, SQLAlchemy's tables and caches, the tool catalogue). Every full collection
walks all of them, tens of milliseconds each time, charged to whichever call happens to allocate
at that moment. Frozen after one collection (`gc.freeze`), they are skipped by later passes;
whatever is made afterwards is collected as usual.

Only the programs that own their process freeze (`toolagent serve`, `toolagent worker`), once
they are ready: the library entry points never do, as it would freeze an embedding program's
objects too.
"""

from __future__ import annotations

import gc


def freeze_long_lived() -> int:
    """Collect, then move every object alive now out of the collector's reach; returns how many."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


__all__ = ["freeze_long_lived"]
