"""Data shipped inside the package, so an installed wheel works anywhere: the seed agent
definitions (`seeds/*.json`), the demo BUILD payload (`seeds/payloads/`), the demo database's
schema and rows (`seeds/demo_db/`) and the default MCP server config (`mcp.json`).

The repository's top-level `seeds/` and `mcp.json` are links to these files.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The default MCP server config's file name.
SERVERS_FILE = "mcp.json"


def data_dir() -> Path:
    """The folder holding the packaged data (wheels install unzipped, so it is a real folder)."""
    return Path(str(resources.files(__name__)))


def seeds_dir() -> Path:
    """The packaged seed folder: agent definitions, payloads and the demo database's files."""
    return data_dir() / "seeds"


def seed_files() -> list[Path]:
    """The packaged seed agent definitions (`seeds/*.json`), sorted."""
    return sorted(seeds_dir().glob("*.json"))


def demo_db_dir() -> Path:
    """The demo database's `schema.sql` and CSV files."""
    return seeds_dir() / "demo_db"


def demo_payload_file() -> Path:
    """The demo BUILD's overrides (`toolagent demo`)."""
    return seeds_dir() / "payloads" / "demo_build.json"


def servers_file() -> Path:
    """The default MCP server config, used when neither `--servers`, `TOOLAGENT_MCP_CONFIG` nor
    `./mcp.json` names one."""
    return data_dir() / SERVERS_FILE


__all__ = ["SERVERS_FILE", "data_dir", "demo_db_dir", "demo_payload_file", "seed_files", "seeds_dir", "servers_file"]
