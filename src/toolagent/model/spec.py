"""Runtime records shared by the MCP layer, the engine and the runner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

#: Between a tool's namespace (its server's name) and its own name: `supabase/get-schema`.
NAMESPACE_SEPARATOR: Final = "/"


def qualified(server: str, tool: str) -> str:
    """`server/tool`: the name agents use."""
    return f"{server}{NAMESPACE_SEPARATOR}{tool}"


def split_name(name: str) -> tuple[str, str]:
    """`ns/tool` -> (`ns`, `tool`); the caller has validated the form."""
    ns, _, tool = name.partition(NAMESPACE_SEPARATOR)
    return ns, tool


@dataclass(frozen=True)
class ToolSpec:
    """One tool of one configured MCP server, as listed by the server plus operator settings.

    Attributes:
        name: qualified `server/tool`.
        server: the server's name in the config (the namespace).
        tool: the tool's own name on its server.
        description: the server's description.
        input_schema: JSON Schema of the arguments.
        output_schema: JSON Schema of `structuredContent`, when declared.
        annotations: the server's hints (`read_only_hint`, `destructive_hint`, ...), snake_case.
        timeout_s: default timeout for calls (per tool, else per server), None for the global default.
        takes_sql: the tool receives SQL in its `sql` argument (checked by the runner's guard).
        trusted: the operator trusts this server's annotations for risk.
        risk: risk set by the operator for this tool (`safe`, `moderate`, `dangerous`) or None.
        category: category set by the operator for this tool, or None.
        title: the server's display title, when given.
    """

    name: str
    server: str
    tool: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    timeout_s: float | None = None
    takes_sql: bool = False
    trusted: bool = False
    risk: str | None = None
    category: str | None = None
    title: str | None = None

    @property
    def required_args(self) -> list[str]:
        """Names the input schema marks required."""
        req = self.input_schema.get("required") or []
        return [r for r in req if isinstance(r, str)]


@dataclass(frozen=True)
class ToolResult:
    """What a tool returned (a tool reporting failure is data: `is_error`).

    Attributes:
        is_error: the server flagged the result as an error.
        structured: `structuredContent`, when the tool returned it.
        content: the content blocks as plain JSON (`{"type": "text", "text": ...}` ...).
        text: every text block joined with newlines.
        truncated: set when this is the bounded form of a larger result (`tools/bounds.py`):
            `{"maxBytes": cap, "sizeBytes": full size}`.
    """

    is_error: bool
    structured: dict[str, Any] | None
    content: list[dict[str, Any]]
    text: str
    truncated: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (`truncated` only when set)."""
        data = {
            "isError": self.is_error,
            "structuredContent": self.structured,
            "content": self.content,
            "text": self.text,
        }
        if self.truncated is not None:
            data["truncated"] = self.truncated
        return data

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ToolResult:
        """A result from its stored form."""
        truncated = raw.get("truncated")
        return cls(
            bool(raw.get("isError")),
            raw.get("structuredContent"),
            list(raw.get("content") or []),
            str(raw.get("text") or ""),
            dict(truncated) if isinstance(truncated, Mapping) else None,
        )
