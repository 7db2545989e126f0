"""Database backends: introspect the schema and run one read-only query.

Both backends are synchronous (the server calls them through `anyio.to_thread`) and both make
the database itself refuse writes, whatever the SQL guard let through:

* `SqliteBackend` opens the embedded file through a `file:...?mode=ro` URI with `query_only`
  on, transpiles the PostgreSQL text to SQLite (`sqlite_compat`), and interrupts a statement
  that runs past the timeout from a progress handler.
* `PostgresBackend` runs everything in a `READ ONLY` transaction with
  `SET LOCAL statement_timeout`, in UTC, and rolls it back afterwards.

Rows are fetched one at a time and stop at `max_rows` rows or `max_result_bytes` bytes
(`limits.py`), so a huge result never reaches memory.
Database errors become `StoreError` with the driver's message (the one translation point).
"""

from __future__ import annotations

import base64
import itertools
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time as dtime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID

from ...errors import StoreError
from .limits import DEFAULT_MAX_RESULT_BYTES, collect, statement_body, wrap_postgres
from .models import ColumnInfo, ForeignKeyInfo, QueryResult, TableInfo

#: A text column with at most this many distinct values has them listed for the generator.
MAX_CATEGORY_VALUES = 50
#: Smallest SQLITE_LIMIT_LENGTH set, whatever the result cap (the demo data's values are small).
_MIN_SQLITE_LENGTH = 100_000
#: Above this many estimated rows, PostgreSQL row counts are the planner's estimate.
EXACT_COUNT_BELOW = 100_000

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


def _dedupe_columns(names: Iterable[str]) -> list[str]:
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


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Backend(ABC):
    """A database the server reads from."""

    #: `embedded` or `postgres`.
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
            f"SELECT {_quote(column)} FROM {_quote(table)} WHERE {_quote(column)} IS NOT NULL "
            f"GROUP BY {_quote(column)} ORDER BY {_quote(column)} LIMIT {MAX_CATEGORY_VALUES + 1}"
        )


class SqliteBackend(Backend):
    """The embedded demo database (a SQLite file), opened read-only."""

    name = "embedded"

    def __init__(self, path: Path, statement_timeout_ms: int, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        super().__init__(statement_timeout_ms, max_result_bytes)
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        from .sqlite_compat import register_functions

        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the embedded database {self.path}: {exc}") from exc
        conn.execute("PRAGMA query_only = ON")
        # PostgreSQL's LIKE is case-sensitive (ILIKE is transpiled to LOWER(..) LIKE LOWER(..)).
        conn.execute("PRAGMA case_sensitive_like = ON")
        register_functions(conn)
        # No string or blob may grow past the result cap: building one is an error, not 1 GB.
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(self.max_result_bytes, _MIN_SQLITE_LENGTH))
        # The statement timeout: SQLite calls the handler every 10,000 virtual machine steps.
        deadline = time.monotonic() + self.statement_timeout_ms / 1000
        conn.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 10_000)
        return conn

    def _run(self, conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise StoreError(f"statement timed out after {self.statement_timeout_ms} ms") from exc
            raise StoreError(f"query failed: {exc}") from exc
        except (sqlite3.Error, ValueError) as exc:
            raise StoreError(f"query failed: {exc}") from exc

    def tables(self) -> list[TableInfo]:
        conn = self._connect()
        try:
            names = [
                r[0]
                for r in self._run(
                    conn, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
                )
            ]
            out: list[TableInfo] = []
            for table in names:
                info = self._run(conn, f"PRAGMA table_info({_quote(table)})").fetchall()
                pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
                columns = [
                    ColumnInfo(name=r[1], type=normalize_type(r[2] or "text"), nullable=not r[3] and r[1] not in pk)
                    for r in info
                ]
                fks = [
                    ForeignKeyInfo(column=r[3], references_table=r[2], references_column=r[4] or "id")
                    for r in self._run(conn, f"PRAGMA foreign_key_list({_quote(table)})").fetchall()
                ]
                count = int(self._run(conn, f"SELECT count(*) FROM {_quote(table)}").fetchone()[0])
                out.append(TableInfo(name=table, columns=columns, primary_key=pk, foreign_keys=fks, row_count=count))
            return out
        finally:
            conn.close()

    def category_values(self, tables: Sequence[TableInfo]) -> dict[tuple[str, str], tuple[str, ...]]:
        conn = self._connect()
        try:
            found: dict[tuple[str, str], tuple[str, ...]] = {}
            for table in tables:
                for column in table.columns:
                    if is_text_type(column.type):
                        values = [str(r[0]) for r in self._run(conn, self._category_query(table.name, column.name))]
                        if 0 < len(values) <= MAX_CATEGORY_VALUES:
                            found[(table.name, column.name)] = tuple(values)
            return found
        finally:
            conn.close()

    def execute(self, sql: str, max_rows: int) -> QueryResult:
        from .sqlite_compat import iso_timestamp, to_sqlite

        try:
            translated = to_sqlite(sql)
        except Exception as exc:  # noqa: BLE001 — sqlglot raises several types for odd input
            raise StoreError(f"cannot run this statement on the embedded database: {exc}") from exc
        conn = self._connect()
        try:
            cursor = self._run(conn, translated)
            columns = _dedupe_columns(d[0] for d in cursor.description or [])
            try:
                return collect(
                    columns, cursor, max_rows=max_rows, max_bytes=self.max_result_bytes,
                    convert=lambda v: json_value(iso_timestamp(v)),
                )  # fmt: skip
            except sqlite3.Error as exc:
                raise StoreError(
                    f"statement timed out after {self.statement_timeout_ms} ms"
                    if "interrupted" in str(exc)
                    else f"query failed: {exc}"
                ) from exc
        finally:
            conn.close()


_PG_TABLES = """
SELECT c.oid, c.relname, c.reltuples::bigint
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
ORDER BY c.relname
"""
_PG_COLUMNS = """
SELECT a.attrelid, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""
_PG_CONSTRAINTS = """
SELECT con.conrelid, con.contype, ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
         JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
       ref.relname,
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
         JOIN pg_catalog.pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i)
FROM pg_catalog.pg_constraint con LEFT JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid
WHERE con.conrelid = ANY(%s) AND con.contype IN ('p', 'f')
ORDER BY con.conrelid, con.conname
"""


class PostgresBackend(Backend):
    """A PostgreSQL database (Supabase or any other), read in READ ONLY transactions."""

    name = "postgres"

    def __init__(self, url: str, statement_timeout_ms: int, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        super().__init__(statement_timeout_ms, max_result_bytes)
        self.url = url

    def _connect(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(self.url, connect_timeout=10, options="-c TimeZone=UTC")
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {_pg_message(exc)}") from exc
        # Every transaction this connection starts is BEGIN READ ONLY.
        conn.read_only = True
        return conn

    def _begin(self, conn: Any) -> None:
        # SET LOCAL lasts until the transaction ends; the value is our own integer, not input.
        conn.execute(f"SET LOCAL statement_timeout = {int(self.statement_timeout_ms)}")

    def _translate(self, exc: Exception) -> StoreError:
        import psycopg

        if isinstance(exc, psycopg.errors.QueryCanceled):
            return StoreError(f"statement timed out after {self.statement_timeout_ms} ms")
        return StoreError(f"query failed: {_pg_message(exc)}")

    def tables(self) -> list[TableInfo]:
        import psycopg

        with self._connect() as conn:
            try:
                self._begin(conn)
                rels = conn.execute(_PG_TABLES).fetchall()
                oids = [r[0] for r in rels]
                columns: dict[int, list[ColumnInfo]] = {oid: [] for oid in oids}
                for relid, name, type_name, nullable in conn.execute(_PG_COLUMNS, [oids]):
                    columns[relid].append(ColumnInfo(name=name, type=normalize_type(type_name), nullable=nullable))
                pks: dict[int, list[str]] = {oid: [] for oid in oids}
                fks: dict[int, list[ForeignKeyInfo]] = {oid: [] for oid in oids}
                for relid, kind, cols, ref_table, ref_cols in conn.execute(_PG_CONSTRAINTS, [oids]):
                    if kind == "p":
                        pks[relid] = list(cols)
                    else:
                        fks[relid].extend(
                            ForeignKeyInfo(column=c, references_table=ref_table, references_column=r)
                            for c, r in zip(cols, ref_cols)
                        )
                out: list[TableInfo] = []
                for oid, name, estimate in rels:
                    count = int(estimate)
                    if count < EXACT_COUNT_BELOW:  # -1 before the first ANALYZE
                        count = int(conn.execute(f"SELECT count(*) FROM {_quote(name)}").fetchone()[0])
                    out.append(
                        TableInfo(name=name, columns=columns[oid], primary_key=pks[oid], foreign_keys=fks[oid], row_count=count)
                    )
                return out
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            finally:
                conn.rollback()

    def category_values(self, tables: Sequence[TableInfo]) -> dict[tuple[str, str], tuple[str, ...]]:
        import psycopg

        found: dict[tuple[str, str], tuple[str, ...]] = {}
        with self._connect() as conn:
            try:
                self._begin(conn)
                for table in tables:
                    for column in table.columns:
                        if is_text_type(column.type):
                            rows = conn.execute(self._category_query(table.name, column.name)).fetchall()
                            if 0 < len(rows) <= MAX_CATEGORY_VALUES:
                                found[(table.name, column.name)] = tuple(str(r[0]) for r in rows)
                return found
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            finally:
                conn.rollback()

    def execute(self, sql: str, max_rows: int) -> QueryResult:
        import psycopg

        body = statement_body(sql)
        with self._connect() as conn:
            try:
                self._begin(conn)
                with conn.cursor() as cur:
                    try:
                        # LIMIT 0 plans the statement and names its columns without running it.
                        cur.execute(f"SELECT * FROM (\n{body}\n) AS _q LIMIT 0")
                        columns = _dedupe_columns(d.name for d in cur.description or [])
                        oversized_index: int | None = len(columns) if columns else None
                        text = wrap_postgres(body, len(columns), self.max_result_bytes) if columns else body
                    except (psycopg.errors.SyntaxError, psycopg.errors.FeatureNotSupported):
                        # Not a query that nests (the guard lets none through; this is the
                        # database's own refusal of anything else): run it as written.
                        conn.rollback()
                        self._begin(conn)
                        columns, oversized_index, text = [], None, body
                    # stream() sends the text as is (no parameters, so `%` stays literal) and
                    # yields rows one by one; leaving it early cancels the rest of the query.
                    stream = cur.stream(text)
                    try:
                        first = next(stream, None)
                        if oversized_index is None:
                            columns = _dedupe_columns(d.name for d in cur.description or [])
                        rows = stream if first is None else itertools.chain([first], stream)
                        return collect(
                            columns, rows, max_rows=max_rows, max_bytes=self.max_result_bytes,
                            convert=json_value, oversized_index=oversized_index,
                        )  # fmt: skip
                    finally:
                        stream.close()
            except psycopg.Error as exc:
                raise self._translate(exc) from exc
            finally:
                conn.rollback()


def _pg_message(exc: Exception) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    if primary:
        return str(primary)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
