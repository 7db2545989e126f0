"""The guard's inputs and outputs: `SqlPolicy` (what is allowed) and `SqlDecision` (the verdict)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlglot.dialects.dialect import Dialect

from .names import normalize_table_name

#: Operations refused even when the policy is not read-only.
DEFAULT_DENIED_OPERATIONS: frozenset[str] = frozenset({"DROP", "TRUNCATE", "ALTER", "DELETE", "UPDATE"})

#: Largest statement accepted, in UTF-8 bytes; checked before parsing.
DEFAULT_MAX_BYTES = 100_000

#: Deepest bracket nesting accepted; checked on the tokens before parsing. sqlglot's parser
#: spends about 20 Python frames per level, so much deeper input would hit the recursion
#: limit (which the guard also catches, but only after the work); real queries stay far below.
DEFAULT_MAX_NESTING_DEPTH = 32


@dataclass(frozen=True)
class SqlPolicy:
    """What the SQL guard accepts.

    `allowed_tables` holds normalized names (as `from_security` produces them: unquoted
    names lower-cased, `public.` left out); None means no table allowlist. Operations are
    compared upper-case. Identifier rules are PostgreSQL's whatever `dialect` says; the
    dialect only chooses the parser.

    Catalog relations (`pg_*`, `pg_catalog.*`, `information_schema.*`, `sqlite_*`) are refused
    whenever there is a table allowlist, and also without one when `refuse_catalogs` is set;
    `allowed_catalog_tables` names the ones an operator enabled anyway.
    """

    allowed_tables: frozenset[str] | None = None
    denied_operations: frozenset[str] = DEFAULT_DENIED_OPERATIONS
    dialect: str = "postgres"
    read_only: bool = True
    max_bytes: int = DEFAULT_MAX_BYTES
    allowed_catalog_tables: frozenset[str] = frozenset()
    refuse_catalogs: bool = False
    table_columns: Mapping[str, Iterable[str]] | tuple[tuple[str, frozenset[str]], ...] | None = None
    """The known columns of tables, by table name (normalized as `allowed_tables`): `t.f` on such
    a table, where `f` is none of them, is judged as the call `f(t)` PostgreSQL makes of it. Kept
    as a tuple of `(table, frozenset of columns)` pairs, so the policy stays hashable."""

    def __post_init__(self) -> None:
        # Accept any iterable from callers, but store frozensets so the policy stays hashable.
        ops = frozenset(op.strip().upper() for op in self.denied_operations if op.strip())
        object.__setattr__(self, "denied_operations", ops)
        if self.allowed_tables is not None:
            object.__setattr__(self, "allowed_tables", frozenset(self.allowed_tables))
        object.__setattr__(
            self,
            "allowed_catalog_tables",
            frozenset(normalize_table_name(t) for t in self.allowed_catalog_tables if t.strip()),
        )
        if self.table_columns is not None:
            items = self.table_columns.items() if isinstance(self.table_columns, Mapping) else self.table_columns
            pairs = tuple(sorted((normalize_table_name(t), frozenset(cols)) for t, cols in items))
            object.__setattr__(self, "table_columns", pairs)
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int) or self.max_bytes <= 0:
            raise ValueError(f"max_bytes must be a positive integer, got {self.max_bytes!r}")
        # Raises ValueError naming the dialect when sqlglot does not know it.
        Dialect.get_or_raise(self.dialect)

    def columns_of(self, table: str) -> frozenset[str] | None:
        """The known columns of `table` (a normalized name), None when they are not known."""
        pairs = self.table_columns if isinstance(self.table_columns, tuple) else ()
        for name, columns in pairs:
            if name == table:
                return columns
        return None

    @classmethod
    def from_security(
        cls,
        denied_operations: Iterable[str] | None,
        allowed_tables: Iterable[str] | None,
        **kw: Any,
    ) -> SqlPolicy:
        """Build a policy from configuration values, normalizing their case.

        Operations are upper-cased; None keeps `DEFAULT_DENIED_OPERATIONS`. Table names follow
        PostgreSQL identifier rules (`Users` -> `users`, `"Users"` stays `Users`,
        `public.users` -> `users`); None means no allowlist. Other keywords (`dialect`,
        `read_only`, `max_bytes`, `allowed_catalog_tables`, `refuse_catalogs`, `table_columns`) are passed through. Raises ValueError for a malformed name.
        """
        ops = DEFAULT_DENIED_OPERATIONS if denied_operations is None else frozenset(denied_operations)
        tables = None
        if allowed_tables is not None:
            tables = frozenset(normalize_table_name(t) for t in allowed_tables if t.strip())
        return cls(allowed_tables=tables, denied_operations=ops, **kw)


@dataclass(frozen=True)
class SqlDecision:
    """The guard's verdict on one SQL text.

    `tables` lists the referenced base tables (normalized, sorted, CTE names left out);
    `statement_kind` is the lower-case kind of the statement (`select`, `union`, `insert`,
    `multiple` for several statements) or None when the text could not be parsed.
    """

    verdict: Literal["allow", "reject"]
    reasons: tuple[str, ...] = field(default=())
    tables: tuple[str, ...] = field(default=())
    statement_kind: str | None = None

    @property
    def allowed(self) -> bool:
        """True when the statement may run."""
        return self.verdict == "allow"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly form: verdict, reasons and tables."""
        return {"verdict": self.verdict, "reasons": list(self.reasons), "tables": list(self.tables)}
