"""The argument check: arguments are validated against the tool's input schema, once per call.

The check runs when the entry point checks the call (`ToolSource.check`), before the gate: bad
arguments are a usage error, answered at once, never recorded or counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..mcp.arguments import check_arguments
from .base import CallContext, ToolCall, WrappedSource


@dataclass
class SchemaCheckedSource(WrappedSource):
    """Refuses arguments that break the tool's input schema, naming each bad field."""

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """Validate the arguments, then run the inner checks.

        Raises:
            ArgumentsInvalid: a field breaks the schema.
        """
        check_arguments(call.spec, call.arguments)
        await self.inner.check(call, ctx)


__all__ = ["SchemaCheckedSource"]
