"""A registered tool: its spec plus how the registry classified it (category, risk, operator settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spec import ToolSpec


@dataclass(frozen=True)
class ToolEntry:
    """One registered tool: its spec plus what the engine decided about it."""

    spec: ToolSpec
    """The MCP layer's record (schema, server, annotations, timeout)."""
    category: str
    """One of the ten categories."""
    risk: str
    """`safe`, `moderate` or `dangerous`."""
    risk_source: str
    """Where the risk came from: `operator`, `table`, `annotations` or `default`."""
    tags: tuple[str, ...] = ()
    """Discovery tags (engine config)."""
    version: str | None = None
    """Version shown in listings (engine config)."""
    deprecated: bool = False
    """Left out of listings unless asked for."""
    enabled: bool = True
    """False: hidden, and every call is denied."""
    category_source: str = "default"
    """Where the category came from: `operator`, `server`, `tool`, `annotations` or `default`."""

    @property
    def name(self) -> str:
        """The qualified name."""
        return self.spec.name

    def matches(self, search: str) -> bool:
        """Case-insensitive substring of the name, title or description."""
        needle = search.lower()
        return any(needle in (text or "").lower() for text in (self.spec.name, self.spec.title, self.spec.description))

    def to_json(self, *, runnable: bool | None = None) -> dict[str, Any]:
        """API form (listTools / getToolDetails field names, plus the engine's own)."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.spec.description,
            "inputSchema": self.spec.input_schema,
            "category": self.category,
            "categorySource": self.category_source,
            "risk": self.risk,
            "riskSource": self.risk_source,
            "tags": list(self.tags),
            "version": self.version,
            "deprecated": self.deprecated,
            "enabled": self.enabled,
            "server": self.spec.server,
            "title": self.spec.title,
        }
        if self.spec.output_schema is not None:
            data["outputSchema"] = self.spec.output_schema
        if runnable is not None:
            data["runnable"] = runnable
        return data


__all__ = ["ToolEntry"]
