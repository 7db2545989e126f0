"""Bounds on what one execute-sql call may return: rows, bytes, and the size of one value.

`max_rows` alone lets a query return a few rows of hundreds of megabytes each, or thousands
of wide rows. Both backends therefore fetch rows one at a time through `collect`, which
counts each row's JSON size and stops fetching as soon as the total passes
`max_result_bytes`; the result says `truncated` with the reason, the cap and the bytes seen.

A single value can still be huge (`repeat('x', 1000000000)` builds 1 GB inside one row),
and a driver receives a row whole. So the database itself is told to leave such values out:
PostgreSQL runs the statement wrapped by `wrap_postgres` (every value larger than the cap
comes back NULL and is counted), and SQLite gets `SQLITE_LIMIT_LENGTH` (building a longer
string or blob is an error). Statements that never finish producing rows end at the
statement timeout on both backends.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .models import QueryResult

#: Most bytes of rows (as JSON) one execute-sql call returns unless configured otherwise.
DEFAULT_MAX_RESULT_BYTES = 5_000_000

#: Name of the column `wrap_postgres` adds: how many values of the row were left out.
OVERSIZED_COLUMN = "__toolagent_oversized"


def collect(
    columns: list[str],
    rows: Iterable[Sequence[Any]],
    *,
    max_rows: int,
    max_bytes: int,
    convert: Callable[[Any], Any],
    oversized_index: int | None = None,
) -> QueryResult:
    """Build a result from `rows`, fetching no more than the caps need.

    Args:
        columns: result column names (already unique).
        rows: an iterator over the driver's rows; it is not advanced past the first row that
            does not fit.
        max_rows: most rows kept.
        max_bytes: most bytes of kept rows, each measured as compact JSON.
        convert: turns a driver value into a JSON-safe one.
        oversized_index: position of the `OVERSIZED_COLUMN` count in each row, if any.
    """
    kept: list[dict[str, Any]] = []
    size = 2  # the rows as one JSON array: brackets, then a comma before every row but the first
    oversized = 0
    reason: str | None = None
    for raw in rows:
        if len(kept) >= max_rows:
            reason = "max_rows"
            break
        values = list(raw)
        if oversized_index is not None:
            oversized += int(values.pop(oversized_index) or 0)
        row = {c: convert(v) for c, v in zip(columns, values)}
        row_bytes = len(json.dumps(row, default=str, separators=(",", ":")).encode("utf-8")) + (1 if kept else 0)
        if size + row_bytes > max_bytes:
            reason = "max_result_bytes"
            size += row_bytes
            break
        kept.append(row)
        size += row_bytes
    if oversized and reason is None:
        reason = "max_result_bytes"
    return QueryResult(
        columns=columns,
        rows=kept,
        row_count=len(kept),
        truncated=reason is not None,
        truncated_reason=reason,
        result_bytes=size,
        max_result_bytes=max_bytes,
        oversized_values=oversized,
    )


def statement_body(sql: str) -> str:
    """The statement without a trailing `;` (and anything after it), so it can be nested."""
    from sqlglot import TokenType
    from sqlglot.dialects.dialect import Dialect

    tokens = list(Dialect.get_or_raise("postgres").tokenize(sql))
    if tokens and tokens[-1].token_type == TokenType.SEMICOLON:
        return sql[: tokens[-1].start]
    return sql


def wrap_postgres(body: str, width: int, max_value_bytes: int) -> str:
    """`body` nested so that values over `max_value_bytes` come back NULL, with a count column.

    The nested query's columns are renamed positionally (`_q(c1, ..., cN)`), so duplicate or
    odd column names in `body` do not matter; the caller keeps the names it described.
    """
    cap = int(max_value_bytes)
    names = [f"c{i}" for i in range(1, width + 1)]
    values = [f"CASE WHEN pg_catalog.pg_column_size(_q.{n}) > {cap} THEN NULL ELSE _q.{n} END" for n in names]
    count = " + ".join(f"(COALESCE(pg_catalog.pg_column_size(_q.{n}), 0) > {cap})::int" for n in names)
    return f"SELECT {', '.join(values)}, {count} AS {OVERSIZED_COLUMN}\nFROM (\n{body}\n) AS _q({', '.join(names)})"
