"""The SQL guard: a SQL-taking tool's statement is checked against the agent's `security` block.

Only calls made under an agent carry a security block (`CallContext.security`); the guard parses
the statement with sqlglot and refuses it (`SqlRejected`, naming every reason). It runs when the
entry point checks the call (`ToolSource.check`), before the gate: a rejected statement is never
sent, recorded or counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SqlRejected
from .base import CallContext, ToolCall, WrappedSource


@dataclass
class SqlGuardedSource(WrappedSource):
    """Refuses SQL the calling agent's security block does not allow."""

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """Check the `sql` argument of a SQL-taking tool, then run the inner checks.

        Raises:
            SqlRejected: the statement breaks the agent's security block.
        """
        security = ctx.security
        sql = call.arguments.get("sql")
        if security is not None and call.spec.takes_sql and isinstance(sql, str):
            from ..sql import SqlGuard, SqlPolicy

            policy = SqlPolicy.from_security(security.denied_operations, security.allowed_tables)
            decision = SqlGuard(policy).check(sql)
            if not decision.allowed:
                raise SqlRejected(list(decision.reasons))
        await self.inner.check(call, ctx)


__all__ = ["SqlGuardedSource"]
