"""A PostgreSQL database (Supabase), read in a `READ ONLY` transaction with
`SET LOCAL statement_timeout`, in UTC, rolled back afterwards. Driver errors become `StoreError`
with the server's message (the one translation point)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ...errors import StoreError
from .backends import MAX_CATEGORY_VALUES, Backend, dedupe_columns, is_text_type, json_value, normalize_type, quote_name
from .limits import DEFAULT_MAX_RESULT_BYTES, collect, statement_body, wrap_postgres
from .models import ColumnInfo, ForeignKeyInfo, QueryResult, TableInfo

#: Above this many estimated rows, PostgreSQL row counts are the planner's estimate.
EXACT_COUNT_BELOW = 100_000

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
                        count = int(conn.execute(f"SELECT count(*) FROM {quote_name(name)}").fetchone()[0])
                    out.append(
                        TableInfo(
                            name=name,
                            columns=columns[oid],
                            primary_key=pks[oid],
                            foreign_keys=fks[oid],
                            row_count=count,
                        )
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
                        columns = dedupe_columns(d.name for d in cur.description or [])
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
                            columns = dedupe_columns(d.name for d in cur.description or [])
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


__all__ = ["EXACT_COUNT_BELOW", "PostgresBackend"]
