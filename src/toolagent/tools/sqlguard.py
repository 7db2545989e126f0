"""The SQL guard: a SQL-taking tool's statement is checked against the agent's `security` block.

Only calls made under an agent carry a security block (`CallContext.security`): BUILD steps, and
direct calls that name an agent (`agent` on executeTool, `--agent` on `toolagent tools call`).
The guard parses the statement with sqlglot and refuses it (`SqlRejected`, naming every reason).
With `require_agent` (`TOOLAGENT_SQL_TOOLS_REQUIRE_AGENT`), a SQL-taking tool called under no
agent at all is refused (`PermissionDenied`). The guard runs when the entry point checks the call
(`ToolSource.check`), before the gate: a rejected statement is never sent, recorded or counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import PermissionDenied, SqlRejected
from .base import CallContext, ToolCall, WrappedSource


@dataclass
class SqlGuardedSource(WrappedSource):
    """Refuses SQL the calling agent's security block does not allow."""

    require_agent: bool = False
    """Refuse SQL-taking tools called under no agent (neither a BUILD step nor a named agent)."""

    async def check(self, call: ToolCall, ctx: CallContext) -> None:
        """Check the `sql` argument of a SQL-taking tool, then run the inner checks.

        Raises:
            SqlRejected: the statement breaks the agent's security block.
            PermissionDenied: `require_agent` is set and the call names no agent.
        """
        if self.require_agent and call.spec.takes_sql and ctx.run_id is None and ctx.agent is None:
            raise PermissionDenied(
                f"tool '{call.name}' takes SQL and this server runs such tools only under an agent "
                "(TOOLAGENT_SQL_TOOLS_REQUIRE_AGENT): name one with `agent` (`org/slug`, `--agent` on the CLI), "
                "whose tool list and security block then apply"
            )
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
