"""What flows between steps: result views, implicit chaining and size caps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ..model.spec import ToolResult, ToolSpec
from ..settings import Settings

#: Longest list passed on to later steps (the stored result keeps everything).
DEFAULT_FLOW_MAX_ITEMS = 1000
#: Longest string passed on to later steps.
DEFAULT_FLOW_MAX_CHARS = 200_000


@dataclass(frozen=True)
class FlowCap:
    """Bounds on what flows on to later steps and to the terminal."""

    max_items: int = DEFAULT_FLOW_MAX_ITEMS
    max_chars: int = DEFAULT_FLOW_MAX_CHARS

    @classmethod
    def from_settings(cls, settings: Settings) -> FlowCap:
        """Bounds from `settings` (`TOOLAGENT_FLOW_MAX_ITEMS`, `TOOLAGENT_FLOW_MAX_CHARS`), else the defaults."""
        values = {"max_items": settings.flow_max_items, "max_chars": settings.flow_max_chars}
        return cls(**{k: v for k, v in values.items() if v is not None})

    def apply(self, value: Any) -> Any:
        """A copy of `value` with lists and strings cut to the bounds."""
        kind = type(value)
        if isinstance(value, str):
            return (
                value
                if len(value) <= self.max_chars
                else value[: self.max_chars] + f"… [{len(value) - self.max_chars} more chars]"
            )
        if kind in (int, float, bool) or value is None:
            return value  # JSON scalars: spares the ABC checks below
        if kind is dict or isinstance(value, Mapping):
            return {k: self.apply(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.apply(v) for v in value[: self.max_items]]
        return value


#: Key of the result view holding what MCP adds around the tool's own fields (text, content
#: blocks, status, isError). Structured fields sit beside it, so no field a tool returns can
#: shadow it, and it can never be mistaken for one of the tool's fields.
RESULT_KEY = "_result"


def result_view(result: ToolResult | None, status: str, cap: FlowCap) -> dict[str, Any]:
    """How later steps see a result: its structured fields, plus `_result` with the rest.

    `_result` holds `text` (every text block joined), `content` (the MCP content blocks),
    `status` (the step's status) and `isError`. A structured field named `_result` is only in
    the stored result: the view's own key takes its place.
    """
    view: dict[str, Any] = dict(result.structured or {}) if result is not None else {}
    view[RESULT_KEY] = {
        "text": result.text if result is not None else "",
        "content": result.content if result is not None else [],
        "status": status,
        "isError": result.is_error if result is not None else False,
    }
    return cast("dict[str, Any]", cap.apply(view))  # a mapping comes back a dict


def fill_required(
    spec: ToolSpec,
    params: dict[str, Any],
    previous_tool: str | None,
    previous_fields: Mapping[str, Any],
    payload: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, str]]:
    """Implicit chaining: fill required arguments the params leave unset.

    `previous_fields` is the previous step's result view (already capped). In order: the
    previous step's structured result field of the same name, then the payload's top-level
    field of the same name. The view's `_result` entry (text, content blocks, status) never
    fills an argument: a tool without structured output passes nothing on implicitly, so an
    argument named `content` or `text` comes from the payload, not from the content blocks. Returns the arguments and, per argument, where it came from
    (`params`, `previous:<tool>.<field>`, `payload.<field>`).
    """
    args = dict(params)
    sources = {name: "params" for name in args}
    for name in spec.required_args:
        if name in args:
            continue
        if previous_tool is not None and name != RESULT_KEY and name in previous_fields:
            args[name] = previous_fields[name]
            sources[name] = f"previous:{previous_tool}.{name}"
        elif name in payload:
            args[name] = payload[name]
            sources[name] = f"payload.{name}"
    return args, sources
