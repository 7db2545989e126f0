"""The SQL guard: decide whether a SQL text may run before it reaches a database.

`SqlGuard(policy).check(sql)` parses with sqlglot (PostgreSQL by default) and returns a
`SqlDecision`; `enforce` raises `toolagent.errors.SqlRejected` instead of returning a reject.
By default exactly one read query is allowed (SELECT, UNION/INTERSECT/EXCEPT, read-only
CTEs), only built-in side-effect-free functions may be called, and an optional table
allowlist holds wherever a table is referenced.
"""

from __future__ import annotations

from .guard import SqlGuard, check_sql
from .policy import DEFAULT_DENIED_OPERATIONS, DEFAULT_MAX_BYTES, SqlDecision, SqlPolicy

__all__ = [
    "DEFAULT_DENIED_OPERATIONS",
    "DEFAULT_MAX_BYTES",
    "SqlDecision",
    "SqlGuard",
    "SqlPolicy",
    "check_sql",
]
