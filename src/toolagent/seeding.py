"""Seeding: upsert agent records from seed JSON files."""

from __future__ import annotations

from pathlib import Path

from . import data
from .agents import load_path
from .store import Store

#: The seed folder shipped in the package.
SEEDS_DIR = data.seeds_dir()


def default_seed_files() -> list[Path]:
    """Every `*.json` directly under `./seeds`, else the seed definitions shipped in the package."""
    return sorted(Path("seeds").glob("*.json")) or data.seed_files()


async def seed_files(store: Store, paths: list[Path]) -> list[tuple[str, str]]:
    """Validate every file first, then upsert each record; returns (ref, outcome) pairs.

    Raises:
        DefinitionInvalid: any file is invalid (nothing is written then).
    """
    loaded = [agent for path in paths for agent in load_path(path)]
    results = []
    for agent in loaded:
        outcome, _ = await store.agents.upsert_agent(agent.record)
        results.append((agent.ref, outcome))
    return results
