"""Seeding: upsert agent records from seed JSON files."""

from __future__ import annotations

from pathlib import Path

from .agents import load_path
from .store import Store

#: The repo's seed folder: found next to the package in a source checkout, else ./seeds.
SEEDS_DIR = Path(__file__).resolve().parents[2] / "seeds"


def default_seed_files() -> list[Path]:
    """Every `*.json` directly under `./seeds`, or the checkout's `seeds/` folder."""
    for folder in (Path("seeds"), SEEDS_DIR):
        files = sorted(folder.glob("*.json"))
        if files:
            return files
    return []


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
