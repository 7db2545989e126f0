"""The embedded demo database (a SQLite file), opened read-only: a `file:...?mode=ro` URI with
`query_only` on, the PostgreSQL text transpiled to SQLite (`sqlite_compat`), and a statement that
runs past the timeout interrupted from a progress handler."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import StoreError
from .backends import MAX_CATEGORY_VALUES, Backend, dedupe_columns, is_text_type, json_value, normalize_type, quote_name
from .limits import DEFAULT_MAX_RESULT_BYTES, collect
from .models import ColumnInfo, ForeignKeyInfo, QueryResult, TableInfo

#: Smallest SQLITE_LIMIT_LENGTH set, whatever the result cap (the demo data's values are small).
_MIN_SQLITE_LENGTH = 100_000


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
                    conn,
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
                )
            ]
            out: list[TableInfo] = []
            for table in names:
                info = self._run(conn, f"PRAGMA table_info({quote_name(table)})").fetchall()
                pk = [r[1] for r in sorted((r for r in info if r[5]), key=lambda r: r[5])]
                columns = [
                    ColumnInfo(name=r[1], type=normalize_type(r[2] or "text"), nullable=not r[3] and r[1] not in pk)
                    for r in info
                ]
                fks = [
                    ForeignKeyInfo(column=r[3], references_table=r[2], references_column=r[4] or "id")
                    for r in self._run(conn, f"PRAGMA foreign_key_list({quote_name(table)})").fetchall()
                ]
                count = int(self._run(conn, f"SELECT count(*) FROM {quote_name(table)}").fetchone()[0])
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
            columns = dedupe_columns(d[0] for d in cursor.description or [])
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


__all__ = ["SqliteBackend"]
