"""Database backends: introspect the schema and run one read-only query.

The backends are synchronous (the server calls them through `anyio.to_thread`) and all make
the database itself refuse writes, whatever the SQL guard let through:

* `sqlite_backend.SqliteBackend` opens the embedded file through a `file:...?mode=ro` URI with
  `query_only` on, transpiles the PostgreSQL text to SQLite (`sqlite_compat`), and interrupts a
  statement that runs past the timeout from a progress handler.
* `postgres_backend.PostgresBackend` runs everything in a `READ ONLY` transaction with
  `SET LOCAL statement_timeout`, in UTC, and rolls it back afterwards.
* `supabase_backend.SupabaseBackend` reaches a Supabase project over HTTPS and calls two SQL
  functions (`functions.py`) that set their own transaction read only.

This module holds what they share: the `Backend` interface and the conversion of values and
column names for a JSON result.

Rows are fetched one at a time and stop at `max_rows` rows or `max_result_bytes` bytes
(`limits.py`), so a huge result never reaches memory.
Database errors become `StoreError` with the driver's message (the one translation point).
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from typing import Any, ClassVar
from uuid import UUID

from .limits import DEFAULT_MAX_RESULT_BYTES
from .models import QueryResult, TableInfo

#: A text column with at most this many distinct values has them listed for the generator.
MAX_CATEGORY_VALUES = 50

_PG_TYPE_NAMES = {
    "timestamp with time zone": "timestamptz",
    "timestamp without time zone": "timestamp",
    "time with time zone": "timetz",
    "time without time zone": "time",
    "character varying": "varchar",
    "character": "char",
    "double precision": "double precision",
}


def normalize_type(name: str) -> str:
    """A compact PostgreSQL type name (`timestamp with time zone` -> `timestamptz`), lower case."""
    lowered = " ".join(name.lower().split())
    base = lowered.split("(")[0].strip()
    return _PG_TYPE_NAMES.get(base, lowered)


def json_value(value: Any) -> Any:
    """A JSON-safe form: ISO 8601 for dates and times, float for Decimal, seconds for intervals."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, Decimal):
        return float(value) if value.is_finite() else str(value)
    if isinstance(value, (datetime, date, dtime)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return str(value)


def dedupe_columns(names: Iterable[str]) -> list[str]:
    """Make result column names unique (`id`, `id` -> `id`, `id_2`) so rows can be objects."""
    seen: dict[str, int] = {}
    out: list[str] = []
    for name in names:
        if name in seen:
            seen[name] += 1
            candidate = f"{name}_{seen[name]}"
            while candidate in seen:
                seen[name] += 1
                candidate = f"{name}_{seen[name]}"
            seen[candidate] = 1
            out.append(candidate)
        else:
            seen[name] = 1
            out.append(name)
    return out


def is_text_type(type_name: str) -> bool:
    """True for character types (`text`, `varchar(n)`, `char`, `citext`)."""
    return type_name.startswith(("text", "varchar", "char", "citext", "character", "bpchar"))


def quote_name(name: str) -> str:
    """An identifier, always double-quoted."""
    return '"' + name.replace('"', '""') + '"'


class Backend(ABC):
    """A database the server reads from."""

    #: `embedded`, `postgres` or `supabase`.
    name: ClassVar[str]

    def __init__(self, statement_timeout_ms: int, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.statement_timeout_ms = statement_timeout_ms
        self.max_result_bytes = max_result_bytes

    @abstractmethod
    def tables(self) -> list[TableInfo]:
        """Every table of the public schema (SQLite: the main database), sorted by name."""

    @abstractmethod
    def category_values(self, tables: Sequence[TableInfo]) -> dict[tuple[str, str], tuple[str, ...]]:
        """Distinct values of each text column that has at most `MAX_CATEGORY_VALUES` of them."""

    @abstractmethod
    def execute(self, sql: str, max_rows: int) -> QueryResult:
        """Run one PostgreSQL-dialect statement read-only.

        At most `max_rows` rows and `max_result_bytes` bytes come back (see `limits.py`).
        """

    def _category_query(self, table: str, column: str) -> str:
        return (
            f"SELECT {quote_name(column)} FROM {quote_name(table)} WHERE {quote_name(column)} IS NOT NULL "
            f"GROUP BY {quote_name(column)} ORDER BY {quote_name(column)} LIMIT {MAX_CATEGORY_VALUES + 1}"
        )


__all__ = [
    "MAX_CATEGORY_VALUES",
    "Backend",
    "dedupe_columns",
    "is_text_type",
    "json_value",
    "normalize_type",
    "quote_name",
]
