"""The SQL guard: decide whether a SQL text may run before it reaches a database.

`SqlGuard(policy).check(sql)` parses with sqlglot (PostgreSQL by default) and returns a
`SqlDecision`; `enforce` raises `toolagent.errors.SqlRejected` instead of returning a reject.
By default exactly one read query is allowed (SELECT, UNION/INTERSECT/EXCEPT, read-only
CTEs), only built-in side-effect-free functions may be called, and an optional table
allowlist holds wherever a table is referenced.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Names load on first use: importing `toolagent.sql.names` (agent validation does, for the
# table allowlist's identifier rules) must not pay for sqlglot.
_EXPORTS = {
    "SqlGuard": ".guard",
    "check_sql": ".guard",
    "DEFAULT_DENIED_OPERATIONS": ".policy",
    "DEFAULT_MAX_BYTES": ".policy",
    "SqlDecision": ".policy",
    "SqlPolicy": ".policy",
}

if TYPE_CHECKING:
    from .guard import SqlGuard, check_sql
    from .policy import DEFAULT_DENIED_OPERATIONS, DEFAULT_MAX_BYTES, SqlDecision, SqlPolicy


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolagent.sql' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_DENIED_OPERATIONS",
    "DEFAULT_MAX_BYTES",
    "SqlDecision",
    "SqlGuard",
    "SqlPolicy",
    "check_sql",
]
