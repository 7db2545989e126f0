"""The tool registry: the MCP pool's `ToolSpec`s with a category, a risk and discovery metadata.

Risk, first source that answers:

1. the operator: the engine config's `tools` entry, else `ToolSpec.risk` from the server config;
2. the built-in risk table (`TABLE_RISK`, `FLAT_RISK`): the qualified name (`file/read`, `shell/exec`), the
   flat names (`file_read`, `http_request`), or — when the tool's category is known — a word of
   its name that the table lists as a verb of that category (`read_file` in category `file` is
   `file/read`, safe). When several words match, the riskiest wins. Nothing else is guessed;
3. the server's annotations, only when the operator marked the server `trusted`:
   `read_only_hint` is safe, `destructive_hint: false` is moderate, `destructive_hint: true` —
   or annotations that leave it out, since MCP's default is destructive — is dangerous;
4. dangerous.

Category, first source that answers (each entry records which, as `category_source`): the
engine config's `tools` entry or `ToolSpec.category` (`operator`), the server's name when it is a
category (`file/read`: `server`), the table's flat names (`http_request` is web: `tool`), what
`category.py` infers from the server's name, the tool's name and title and its annotations
(`server`, `tool`, `annotations`), else `agent` (`default`). The verb table of step 2 of the risk
order applies only to a category from the operator or the server's name: a category a server
gives itself through its tools' names never lowers their risk. Unclassified tools are `agent` tools — capabilities an agent reaches through its
MCP servers — so an API key scoped to a category never reaches them without
`agent:execute:agent` or `*`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import ConfigError, NotFound
from ..model.entry import ToolEntry
from ..model.permissions import CATEGORIES, RISKS
from ..model.spec import ToolSpec
from .category import infer_category
from .config import EngineConfig

#: Category of tools nothing classifies.
FALLBACK_CATEGORY: Final = "agent"
#: Risk of tools nothing classifies.
FALLBACK_RISK: Final = "dangerous"

#: Risk of well-known qualified tool names (`category/verb`).
TABLE_RISK: Final[dict[str, str]] = {
    "browser/navigate": "safe",
    "browser/click": "moderate",
    "browser/type": "moderate",
    "browser/extract": "safe",
    "browser/screenshot": "safe",
    "browser/scroll": "moderate",
    "browser/wait": "moderate",
    "browser/close": "dangerous",
    "file/read": "safe",
    "file/list": "safe",
    "file/search": "safe",
    "file/write": "dangerous",
    "file/edit": "dangerous",
    "file/delete": "dangerous",
    "shell/exec": "dangerous",
    "shell/script": "dangerous",
    "web/get": "safe",
    "web/post": "moderate",
    "web/put": "moderate",
    "web/delete": "dangerous",
    "web/download": "moderate",
}
#: Risk of well-known flat tool names, with the category each belongs to.
FLAT_RISK: Final[dict[str, tuple[str, str]]] = {
    "retrieve_documentation": ("safe", "memory"),
    "file_read": ("safe", "file"),
    "file_list": ("safe", "file"),
    "file_search": ("safe", "file"),
    "retrieve_data": ("safe", "memory"),
    "browser_navigate": ("safe", "browser"),
    "browser_extract": ("safe", "browser"),
    "browser_screenshot": ("safe", "browser"),
    "http_request": ("moderate", "web"),
    "store_data": ("moderate", "memory"),
    "browser_click": ("moderate", "browser"),
    "browser_type": ("moderate", "browser"),
    "browser_select": ("moderate", "browser"),
    "browser_scroll": ("moderate", "browser"),
    "browser_wait": ("moderate", "browser"),
    "update_plan": ("moderate", "workflow"),
    "advance_phase": ("moderate", "workflow"),
    "file_write": ("dangerous", "file"),
    "file_edit": ("dangerous", "file"),
    "shell_exec": ("dangerous", "shell"),
    "browser_close": ("dangerous", "browser"),
    "ask_user": ("dangerous", "agent"),
}
# category -> {verb: risk}, from TABLE_RISK.
_VERBS: Final[dict[str, dict[str, str]]] = {}
for _name, _risk in TABLE_RISK.items():
    _cat, _verb = _name.split("/", 1)
    _VERBS.setdefault(_cat, {})[_verb] = _risk
_RANK: Final[dict[str, int]] = {r: i for i, r in enumerate(RISKS)}
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")


def _words(name: str) -> list[str]:
    return [w.lower() for chunk in _SPLIT.split(name) for w in _CAMEL.split(chunk) if w]


def _flat(name: str) -> str:
    return "_".join(_words(name))


def classify_category(spec: ToolSpec, operator: str | None = None) -> str:
    """The tool's category (see the module docstring for the order)."""
    return category_with_source(spec, operator)[0]


def category_with_source(spec: ToolSpec, operator: str | None = None) -> tuple[str, str]:
    """The tool's category and where it came from (`operator`, `server`, `tool`, `annotations`, `default`)."""
    for candidate in (operator, spec.category):
        if candidate in CATEGORIES:
            return candidate, "operator"
    if spec.server in CATEGORIES:
        return spec.server, "server"
    flat = FLAT_RISK.get(_flat(spec.tool))
    if flat is not None:
        return flat[1], "tool"
    inferred = infer_category(spec.server, spec.tool, title=spec.title, annotations=spec.annotations)
    if inferred is not None and inferred[0] in CATEGORIES:
        return inferred
    return FALLBACK_CATEGORY, "default"


def classify_risk(
    spec: ToolSpec, category: str, operator: str | None = None, *, category_source: str = "operator"
) -> tuple[str, str]:
    """The tool's risk and where it came from (`operator`, `table`, `annotations`, `default`).

    `category_source` says where `category` came from; the category's verb table is used only
    for `operator` and `server` (names the operator chose).
    """
    for candidate in (operator, spec.risk):
        if candidate in _RANK:
            return candidate, "operator"
    hit = TABLE_RISK.get(spec.name) or TABLE_RISK.get(f"{spec.server}/{_flat(spec.tool)}")
    if hit is not None:
        return hit, "table"
    for flat in (_flat(spec.tool), _flat(spec.name)):
        if flat in FLAT_RISK:
            return FLAT_RISK[flat][0], "table"
    verbs = _VERBS.get(category) if category_source in ("operator", "server") else None
    if verbs:
        found = [verbs[w] for w in _words(spec.tool) if w in verbs]
        if found:
            return max(found, key=_RANK.__getitem__), "table"
    if spec.trusted and spec.annotations:
        ann = spec.annotations
        if ann.get("read_only_hint") is True:
            return "safe", "annotations"
        if ann.get("destructive_hint") is False:
            return "moderate", "annotations"
        return "dangerous", "annotations"
    return FALLBACK_RISK, "default"


@dataclass(frozen=True)
class ToolListing:
    """A discovery answer: the matching tools, also grouped by category."""

    tools: tuple[ToolEntry, ...]
    """Matching tools, by name."""
    runnable: frozenset[str] | None = None
    """The names of those the caller may run, as the policy decides; None: no caller asked."""
    categorized: dict[str, tuple[ToolEntry, ...]] = field(default_factory=dict)
    """The same tools by category (categories without tools left out)."""

    @property
    def total_count(self) -> int:
        """How many tools matched."""
        return len(self.tools)

    def to_json(self) -> dict[str, Any]:
        """API form: `tools`, `categorizedTools`, `totalCount`, `categories`."""
        runnable = self.runnable

        def one(e: ToolEntry) -> dict[str, Any]:
            return e.to_json(runnable=None if runnable is None else e.name in runnable)

        return {
            "tools": [one(e) for e in self.tools],
            "categorizedTools": {c: [one(e) for e in es] for c, es in self.categorized.items()},
            "totalCount": self.total_count,
            "categories": list(self.categorized),
        }


class Registry:
    """The tools the engine knows, replaced as a whole whenever the tool lists are (re)loaded."""

    def __init__(
        self, config: EngineConfig | None = None, *, on_registered: Callable[[ToolEntry], None] | None = None
    ) -> None:
        self.config = config or EngineConfig()
        self._entries: dict[str, ToolEntry] = {}
        self._on_registered = on_registered

    def classify(self, spec: ToolSpec) -> ToolEntry:
        """An entry for `spec` with the engine config's overrides applied (not registered)."""
        override = self.config.tool_override(spec.name)
        category, category_source = category_with_source(spec, override.category if override else None)
        risk, source = classify_risk(
            spec, category, override.risk if override else None, category_source=category_source
        )
        if override is None:
            return ToolEntry(spec, category, risk, source, category_source=category_source)
        return ToolEntry(
            spec,
            category,
            risk,
            source,
            tags=tuple(override.tags or ()),
            version=override.version,
            deprecated=bool(override.deprecated),
            enabled=override.enabled is not False,
            category_source=category_source,
        )

    def update(self, specs: Iterable[ToolSpec]) -> list[ToolEntry]:
        """Replace the registered tools with `specs`; returns the entries new since the last update.

        Raises:
            ConfigError: two specs share a name (nothing is changed).
        """
        fresh: dict[str, ToolEntry] = {}
        for spec in specs:
            if spec.name in fresh:
                raise ConfigError(
                    f"tool '{spec.name}' is listed twice (servers '{fresh[spec.name].spec.server}' and '{spec.server}'): "
                    "rename one server in the MCP config"
                )
            fresh[spec.name] = self.classify(spec)
        added = [e for name, e in fresh.items() if name not in self._entries]
        self._entries = fresh
        if self._on_registered is not None:
            for entry in added:
                self._on_registered(entry)
        return added

    def entry_for(self, spec: ToolSpec) -> ToolEntry:
        """The registered entry of this very spec, else a fresh classification of it."""
        entry = self._entries.get(spec.name)
        if entry is not None and (entry.spec is spec or entry.spec == spec):
            return entry
        return self.classify(spec)

    def get(self, name: str) -> ToolEntry | None:
        """The entry named `name`, if registered."""
        return self._entries.get(name)

    def require(self, name: str) -> ToolEntry:
        """The entry named `name`.

        Raises:
            NotFound: no such tool (the message says how to list them).
        """
        entry = self._entries.get(name)
        if entry is None:
            raise NotFound(f"tool '{name}' not found: `toolagent tools list` shows the tools of the configured servers")
        return entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entries(self) -> list[ToolEntry]:
        """Every registered tool, by name."""
        return [self._entries[k] for k in sorted(self._entries)]

    def list(
        self,
        *,
        category: str | None = None,
        search: str | None = None,
        tags: Sequence[str] | None = None,
        include_deprecated: bool = False,
        include_disabled: bool = False,
        visible: Callable[[ToolEntry], bool] | None = None,
        runnable: Callable[[ToolEntry], bool] | None = None,
    ) -> ToolListing:
        """Discovery: filter, then group by category (in `CATEGORIES` order).

        Args:
            category: Only this category.
            search: Substring of the name, title or description (case-insensitive).
            tags: Only tools carrying every one of these tags.
            include_deprecated: Keep deprecated tools (left out by default).
            include_disabled: Keep disabled tools (hidden by default).
            visible: Only the tools the caller may see (a scoped key's categories).
            runnable: Whether the caller may run a tool (the policy's answer), to mark each.
        """
        wanted = set(tags or ())
        found = tuple(
            e
            for e in self.entries()
            if (category is None or e.category == category)
            and (include_deprecated or not e.deprecated)
            and (include_disabled or e.enabled)
            and (not search or e.matches(search))
            and wanted <= set(e.tags)
            and (visible is None or visible(e))
        )
        grouped = {c: tuple(e for e in found if e.category == c) for c in CATEGORIES}
        marked = None if runnable is None else frozenset(e.name for e in found if runnable(e))
        return ToolListing(found, marked, {c: es for c, es in grouped.items() if es})


__all__ = [
    "FALLBACK_CATEGORY",
    "FALLBACK_RISK",
    "FLAT_RISK",
    "TABLE_RISK",
    "Registry",
    "ToolEntry",
    "ToolListing",
    "category_with_source",
    "classify_category",
    "classify_risk",
]
