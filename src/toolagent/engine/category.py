"""Category inference for tools whose operator set none.

An operator's word always wins (see `engine/registry.py`). Without one, the category is read,
in order, from:

1. `server`: a word of the server's name in the MCP config (`filesystem`, `fs` -> file;
   `playwright`, `browser` -> browser; `fetch`, `web` -> web; `postgres`, `supabase` -> database ...).
   The operator chose that name, so it is as good as a setting;
2. `tool`: a word of the tool's own name or title (`read_file` -> file, `browser_click` -> browser);
3. `annotations`: `openWorldHint: true` (the tool reaches outside the host) -> web.

Categories from 2 and 3 come from the server itself, which may be untrusted: they place the tool
in listings and scopes, but never lower its risk (the registry uses a category's verb table only
when the category came from the operator or the server's name).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

#: Where a category came from, in the order they are tried.
CATEGORY_SOURCES: Final = ("operator", "server", "tool", "annotations", "default")

# When several words match, the most specific category wins (this order).
_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "browser": ("browser", "browsers", "playwright", "puppeteer", "chrome", "chromium", "selenium", "webdriver"),
    "file": ("file", "files", "filesystem", "fs", "directory", "directories", "folder", "folders", "git", "repository"),
    "database": (
        "db",
        "database",
        "databases",
        "sql",
        "sqlite",
        "postgres",
        "postgresql",
        "mysql",
        "supabase",
        "mongo",
        "mongodb",
        "redis",
    ),
    "shell": ("shell", "terminal", "bash", "zsh", "exec", "command", "commands"),
    "memory": ("memory", "memories", "knowledge", "graph"),
    "web": ("web", "fetch", "http", "https", "url", "search", "crawl", "scrape"),
    "ai": ("thinking", "llm", "ai", "reasoning"),
    "system": ("time", "clock", "timezone", "system", "os", "process", "processes"),
    "workflow": ("workflow", "plan", "todo", "tasks"),
}
_BY_WORD: Final[dict[str, str]] = {w: cat for cat, words in _WORDS.items() for w in words}
_RANK: Final[dict[str, int]] = {cat: i for i, cat in enumerate(_WORDS)}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def words(name: str) -> list[str]:
    """Lower-case words of a name: `read_file`, `readFile`, `read-file` and `Read File` give `read`, `file`."""
    return [w.lower() for chunk in _SPLIT.split(name) for w in _CAMEL.split(chunk) if w]


def _from_words(*names: str) -> str | None:
    found = {_BY_WORD[w] for name in names for w in words(name) if w in _BY_WORD}
    return min(found, key=_RANK.__getitem__) if found else None


def infer_category(
    server: str, tool: str, *, title: str | None = None, annotations: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """The category of a tool nobody classified, and where it came from.

    Args:
        server: the server's name in the MCP config.
        tool: the tool's name on its server.
        title: the tool's display title (or its annotations' title).
        annotations: the server's hints, snake_case (`open_world_hint`, ...).

    Returns:
        `(category, source)` with source `server`, `tool` or `annotations`; None when nothing tells.
    """
    found = _from_words(server)
    if found is not None:
        return found, "server"
    ann = annotations or {}
    found = _from_words(tool, title or "", str(ann.get("title") or ""))
    if found is not None:
        return found, "tool"
    if ann.get("open_world_hint") is True:
        return "web", "annotations"
    return None
