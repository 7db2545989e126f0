"""The client session every server connection uses: the SDK's, with a faster check of results.

The SDK checks each tool result's `structuredContent` against the tool's `outputSchema` with a
compiled jsonschema validator, whose walk builds a `referencing` resource for every subschema it
descends into: for a small object of two typed fields that walk was about a tenth of a whole stdio
call's CPU in this process. Most output schemas are that shape (an object of typed properties,
some required), which `arguments.quick_check` decides by looking at each value's type; a result it
passes is surely valid, and anything else (another shape of schema, a value it cannot vouch for,
no structured content at all) goes to the SDK's own check, which decides and words the error. So
what is accepted and refused, and the messages, are the SDK's.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp import ClientSession, MCPError
from mcp.types import REQUEST_TIMEOUT, CallToolResult

from .arguments import Quick, quick_check


class CheckedSession(ClientSession):
    """`ClientSession` whose `validate_tool_result` first tries the quick check (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._quick_results: dict[str, tuple[Any, Quick | None]] = {}
        self.abandoned_calls = 0
        """Calls given up before their answer (timed out or cancelled): the server may still be busy
        in them when the connection closes (`mcp.server_process`)."""

    async def call_tool(self, *args: Any, **kwargs: Any) -> CallToolResult:
        """The SDK's `call_tool`, counting the calls abandoned before their answer."""
        try:
            result: CallToolResult = await super().call_tool(*args, **kwargs)
            return result
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                self.abandoned_calls += 1
            raise
        except anyio.get_cancelled_exc_class():
            self.abandoned_calls += 1
            raise

    async def validate_tool_result(self, name: str, result: CallToolResult) -> None:
        """Return at once for a structured result the tool's output schema surely accepts; else
        the SDK's check (which may list the tools again to learn the schema)."""
        # The SDK's cache of the listed output schemas; were it renamed, every result would simply
        # take the SDK's own check.
        schema = getattr(self, "_tool_output_schemas", {}).get(name)
        content = result.structured_content
        if isinstance(schema, dict) and isinstance(content, dict):
            quick = self._quick(name, schema)
            if quick is not None and quick(content):
                return
        await super().validate_tool_result(name, result)

    def _quick(self, name: str, schema: dict[str, Any]) -> Quick | None:
        # Keyed by the schema object: a tool listed again with another schema gets a new check.
        hit = self._quick_results.get(name)
        if hit is None or hit[0] is not schema:
            hit = self._quick_results[name] = (schema, quick_check(schema))
        return hit[1]


__all__ = ["CheckedSession"]
