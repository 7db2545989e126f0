"""Seeding: upsert agent records from seed JSON files."""

from __future__ import annotations

from pathlib import Path

from . import data
from .agents import load_path
from .engine.ownership import Actor
from .store import Store

#: The seed folder shipped in the package.
SEEDS_DIR = data.seeds_dir()


def default_seed_files() -> list[Path]:
    """Every `*.json` directly under `./seeds`, else the seed definitions shipped in the package."""
    return sorted(Path("seeds").glob("*.json")) or data.seed_files()


async def seed_files(store: Store, paths: list[Path], actor: Actor | None = None) -> list[tuple[str, str]]:
    """Validate every file first, then upsert each record; returns (ref, outcome) pairs.

    Each change is audited as made by `actor` (default: the local operator, named after the OS
    account). An organization seeding creates has no members: global admins administer it until
    roles are granted (`toolagent orgs grant`).

    Raises:
        DefinitionInvalid: any file is invalid (nothing is written then).
    """
    from .engine.orgs import Organizations
    from .engine.principals import local_user_name

    loaded = [agent for path in paths for agent in load_path(path)]
    orgs = Organizations(store.db)
    who = actor or Actor.local_operator(local_user_name())
    results: list[tuple[str, str]] = []
    for agent in loaded:
        outcome, _ = await orgs.put_agent(who, agent.record)
        results.append((agent.ref, outcome))
    return results
