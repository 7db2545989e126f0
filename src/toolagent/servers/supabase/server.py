"""The Supabase MCP server: get-schema, generate-sql, execute-sql and analyze-results.

`build_server(settings)` returns an `MCPServer` whose four tools are all read-only (and say
so in their annotations) and return structured results (`models.py`). SQL is checked twice:
by the SQL guard (`toolagent.sql`: one read query, no denied operation, only allowed
tables) and then by the database itself (a read-only SQLite connection, a PostgreSQL
READ ONLY transaction with a statement timeout, or, for a Supabase project over HTTPS, a
function that sets its transaction read only).

Only what every call needs is imported here; the database drivers, sqlglot, the generator
and httpx load on first use, so the server starts quickly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ...errors import ToolAgentError
from .models import AnalysisResult, GeneratedSql, QueryResult, SchemaResult, TableInfo
from .settings import SupabaseSettings

if TYPE_CHECKING:
    from ...sql import SqlGuard
    from .backends import Backend
    from .catalog import Catalog

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

#: Every tool only reads.
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
#: Rows generate-sql limits a query to unless asked otherwise.
DEFAULT_GENERATE_MAX_ROWS = 100
#: Rows execute-sql returns unless asked otherwise.
DEFAULT_EXECUTE_MAX_ROWS = 1000
#: The most rows any call may ask for.
MAX_ROWS_LIMIT = 10_000
#: How long generate-sql reuses the introspected schema and category values, and the SQL guard
#: the tables' columns.
CATALOG_TTL_S = 60.0

INSTRUCTIONS = (
    "Read-only analytics over a PostgreSQL (Supabase) database. Call get-schema to see tables, "
    "generate-sql to turn a question into SQL, execute-sql to run a SELECT (rows come back as "
    "objects keyed by column), and analyze-results to summarize rows."
)


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Turn the failures a caller should read into tool errors (is_error with the message)."""
    from .question import NotUnderstood

    try:
        yield
    except (ToolAgentError, NotUnderstood) as exc:
        raise ToolError(str(exc)) from exc


class SupabaseService:
    """The tools' logic, independent of MCP: one backend, one guard, a cached catalog.

    `clock` (monotonic seconds) dates the cached catalog and columns."""

    def __init__(self, settings: SupabaseSettings, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._clock = clock
        self._backend: Backend | None = None
        self._lock = anyio.Lock()
        self._catalog: tuple[float, list[TableInfo], Catalog] | None = None
        self._guard: SqlGuard | None = None
        self._columns_lock = anyio.Lock()
        self._column_guard: tuple[float, SqlGuard] | None = None

    # -- shared pieces ------------------------------------------------------------------------

    @property
    def guard(self) -> SqlGuard:
        """The SQL guard with the configured table allowlist."""
        if self._guard is None:
            from ...sql import SqlGuard, SqlPolicy

            policy = SqlPolicy.from_security(
                denied_operations=None,
                allowed_tables=self.settings.allowed_tables,
                allowed_catalog_tables=self.settings.allowed_catalog_tables,
                refuse_catalogs=True,
            )
            self._guard = SqlGuard(policy)
        return self._guard

    async def column_guard(self) -> SqlGuard:
        """The SQL guard knowing the live tables' columns (`SqlPolicy.table_columns`), read from the
        database at most once every `CATALOG_TTL_S`.

        With them, `t.f` on a table with no column `f` is judged as the call `f(t)` PostgreSQL
        makes of it (allowed only for an allowed function), so a user function of a table's row
        type cannot run as if it were a column; a column added or dropped counts within a minute.
        """
        async with self._columns_lock:
            now = self._clock()
            if self._column_guard is None or now - self._column_guard[0] > CATALOG_TTL_S:
                from dataclasses import replace

                from ...sql import SqlGuard
                from .backends import quote_name

                backend = await self.backend()
                tables = await anyio.to_thread.run_sync(backend.tables)
                # Quoted, so the names are kept exactly as the database spells them.
                columns = {quote_name(t.name): [c.name for c in t.columns] for t in tables}
                self._column_guard = (now, SqlGuard(replace(self.guard.policy, table_columns=columns)))
            return self._column_guard[1]

    @property
    def allowed_tables(self) -> frozenset[str] | None:
        """The normalized table allowlist, None when every table is allowed."""
        return self.guard.policy.allowed_tables

    async def backend(self) -> Backend:
        """The database, created (and for the embedded one, built) on first use."""
        async with self._lock:
            if self._backend is None:
                timeout = self.settings.statement_timeout_ms
                if self.settings.backend == "supabase":
                    from .supabase_backend import SupabaseBackend

                    url, key, bearer = self.settings.require_project()
                    self._backend = SupabaseBackend(
                        url,
                        key,
                        timeout,
                        self.settings.max_result_bytes,
                        bearer=bearer,
                        key_variable="SUPABASE_SERVICE_ROLE_KEY"
                        if bearer is None
                        else "SUPABASE_ANON_KEY and SUPABASE_READER_JWT",
                    )
                elif self.settings.backend == "postgres":
                    from .postgres_backend import PostgresBackend

                    self._backend = PostgresBackend(
                        self.settings.require_db_url(), timeout, self.settings.max_result_bytes
                    )
                else:
                    from .demo_data import ensure_sqlite_demo
                    from .sqlite_backend import SqliteBackend

                    path = self.settings.resolved_demo_db_path()
                    await anyio.to_thread.run_sync(ensure_sqlite_demo, path)
                    self._backend = SqliteBackend(path, timeout, self.settings.max_result_bytes)
            return self._backend

    async def _tables(self) -> list[TableInfo]:
        backend = await self.backend()
        tables = await anyio.to_thread.run_sync(backend.tables)
        allowed = self.allowed_tables
        return [t for t in tables if allowed is None or t.name in allowed]

    async def catalog(self) -> tuple[list[TableInfo], Catalog]:
        """Permitted tables and their catalog, reused for `CATALOG_TTL_S`."""
        from .catalog import Catalog

        now = self._clock()
        if self._catalog is None or now - self._catalog[0] > CATALOG_TTL_S:
            tables = await self._tables()
            backend = await self.backend()
            values = await anyio.to_thread.run_sync(backend.category_values, tables)
            self._catalog = (now, tables, Catalog.from_schema(tables, values))
        return self._catalog[1], self._catalog[2]

    def _select_tables(self, names: list[str] | None, existing: list[TableInfo]) -> list[TableInfo]:
        """The requested tables, checked against what exists and what is allowed."""
        if names is None:
            return existing
        from ...sql.names import normalize_table_name

        by_name = {t.name: t for t in existing}
        allowed = self.allowed_tables
        chosen: list[TableInfo] = []
        for raw in names:
            try:
                name = normalize_table_name(raw)
            except ValueError as exc:
                raise ToolError(f"table name {raw!r} is not valid: {exc}") from exc
            if allowed is not None and name not in allowed:
                raise ToolError(f"table '{name}' is not in allowed tables ({', '.join(sorted(allowed))})")
            if name not in by_name:
                raise ToolError(f"table '{name}' does not exist (tables: {', '.join(sorted(by_name)) or 'none'})")
            if by_name[name] not in chosen:
                chosen.append(by_name[name])
        return chosen

    # -- the tools ----------------------------------------------------------------------------

    async def get_schema(self, tables: list[str] | None) -> SchemaResult:
        """Tables with columns, keys and row counts; only allowed ones."""
        with _tool_errors():
            chosen = self._select_tables(tables, await self._tables())
            return SchemaResult(tables=sorted(chosen, key=lambda t: t.name), backend=self.settings.backend)

    async def generate_sql(self, query: str, tables: list[str] | None, max_rows: int) -> GeneratedSql:
        """SQL for a question, checked by the guard and limited to the permitted tables."""
        with _tool_errors():
            existing, catalog = await self.catalog()
            chosen = self._select_tables(tables, existing)
            permitted = {t.name for t in chosen}
            if self.settings.llm_enabled:
                sql, explanation = await self._llm_sql(query, catalog.restrict(permitted), max_rows)
            else:
                from .generator import generate_sql

                generated = generate_sql(query, catalog.restrict(permitted), max_rows, outside=catalog)
                sql, explanation = generated.sql, generated.explanation
            decision = self.guard.check(sql)
            if not decision.allowed:
                raise ToolError("generated SQL was rejected by the SQL guard: " + "; ".join(decision.reasons))
            outside = sorted(set(decision.tables) - permitted)
            if outside:
                raise ToolError(
                    f"generated SQL reads {', '.join(outside)}, outside the tables it may use ({', '.join(sorted(permitted))})"
                )
            return GeneratedSql(sql=sql, tables=list(decision.tables), explanation=explanation)

    async def _llm_sql(self, query: str, catalog: Catalog, max_rows: int) -> tuple[str, str]:
        from . import llm

        reply = await llm.chat(self.settings, llm.SQL_SYSTEM_PROMPT, llm.sql_prompt(query, catalog, max_rows))
        sql = llm.extract_sql(reply)
        decision = (await self.column_guard()).check(sql)
        if not decision.allowed:
            raise ToolError("generated SQL was rejected by the SQL guard: " + "; ".join(decision.reasons))
        return _cap_limit(sql, max_rows), f"Written by the LLM ({self.settings.llm_model}) for: {query}"

    async def execute_sql(self, sql: str, max_rows: int) -> QueryResult:
        """Run one guarded statement read-only."""
        with _tool_errors():
            # The statement alone first: what it breaks is refused before any I/O. Then with
            # the tables' columns, which may need a read of the schema.
            self.guard.enforce(sql)
            (await self.column_guard()).enforce(sql)
            backend = await self.backend()
            return await anyio.to_thread.run_sync(backend.execute, sql, max_rows)

    async def analyze_results(
        self, rows: list[Any], columns: list[str] | None, analysis_prompt: str | None, truncated: bool | None
    ) -> AnalysisResult:
        """Statistics and a summary of rows."""
        from .analysis import analyze

        with _tool_errors():
            result = await anyio.to_thread.run_sync(
                lambda: analyze(rows, columns, analysis_prompt, truncated=truncated)
            )
            if self.settings.llm_enabled:
                from . import llm

                prompt = llm.summary_prompt(
                    analysis_prompt or "Summarize the main findings",
                    result.stats.model_dump(exclude_none=True),
                    result.stats.row_count,
                )
                summary = await llm.chat(self.settings, llm.SUMMARY_SYSTEM_PROMPT, prompt)
                result = AnalysisResult(summary=summary.strip(), stats=result.stats)
            return result


def _cap_limit(sql: str, max_rows: int) -> str:
    """Add or lower the statement's LIMIT to max_rows (LLM output may lack one)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Query):
        return sql
    limit = tree.args.get("limit")
    current = limit.expression if isinstance(limit, exp.Limit) else None
    if isinstance(current, exp.Literal) and current.is_int and int(current.name) <= max_rows:
        return sql
    return tree.limit(max_rows).sql(dialect="postgres", pretty=True)


def build_server(settings: SupabaseSettings | None = None, *, log_level: LogLevel = "WARNING") -> MCPServer:
    """The Supabase MCP server.

    Args:
        settings: configuration; read from the `SUPABASE_*` environment variables when None.
            A postgres backend without a URL (a supabase one without its URL or key) still
            builds; its database tools then fail with "Required environment variable
            SUPABASE_DB_URL is not set" (SUPABASE_URL, SUPABASE_SERVICE_ROLE_KEY ...).
        log_level: the server's (and, over HTTP, uvicorn's) log level on stderr.
    """
    service = SupabaseService(settings if settings is not None else SupabaseSettings.from_env())
    server = MCPServer("supabase", instructions=INSTRUCTIONS, log_level=log_level)

    @server.tool(name="get-schema", annotations=READ_ONLY)
    async def get_schema(
        tables: Annotated[
            list[str] | None, Field(description="Only these tables (default: every allowed table)")
        ] = None,
    ) -> SchemaResult:
        """List tables with their columns (name, type, nullable), primary and foreign keys and row counts."""
        return await service.get_schema(tables)

    @server.tool(name="generate-sql", annotations=READ_ONLY)
    async def generate_sql(
        query: Annotated[str, Field(description="The question in plain language, e.g. 'top 10 conversations by date'")],
        tables: Annotated[list[str] | None, Field(description="Tables the SQL may read (default: all allowed)")] = None,
        max_rows: Annotated[
            int, Field(ge=1, le=MAX_ROWS_LIMIT, description="LIMIT unless the question asks for fewer rows")
        ] = DEFAULT_GENERATE_MAX_ROWS,
    ) -> GeneratedSql:
        """Turn a natural-language analytics question into one read-only PostgreSQL SELECT.

        Counts, averages, sums, min/max, grouping (by a column, a referenced table or month/week/day),
        top-N and ordering, filters on values in the data, numbers and date ranges, and joins along
        foreign keys. The SQL has passed the SQL guard; a question it cannot place is an error
        naming the words it did not understand.
        """
        return await service.generate_sql(query, tables, max_rows)

    @server.tool(name="execute-sql", annotations=READ_ONLY)
    async def execute_sql(
        sql: Annotated[str, Field(description="One PostgreSQL SELECT statement")],
        max_rows: Annotated[
            int, Field(ge=1, le=MAX_ROWS_LIMIT, description="Most rows to return")
        ] = DEFAULT_EXECUTE_MAX_ROWS,
    ) -> QueryResult:
        """Run one read-only SELECT and return its rows as objects keyed by column name.

        The SQL guard rejects anything but a single read query on allowed tables; the database then
        runs it read-only with a statement timeout. `truncated` is true when rows were left out:
        more than max_rows rows, or more than the server's max_result_bytes (`truncated_reason`).
        """
        return await service.execute_sql(sql, max_rows)

    @server.tool(name="analyze-results", annotations=READ_ONLY)
    async def analyze_results(
        rows: Annotated[
            list[dict[str, Any] | list[Any]],
            Field(description="Rows as objects keyed by column (as execute-sql returns them) or as arrays"),
        ],
        columns: Annotated[list[str] | None, Field(description="Column names (needed for array rows)")] = None,
        analysis_prompt: Annotated[
            str | None, Field(description="What to focus on, e.g. 'Summarize for stakeholders'")
        ] = None,
        row_count: Annotated[int | None, Field(description="Accepted from execute-sql's result; unused")] = None,
        truncated: Annotated[
            bool | None, Field(description="From execute-sql: the rows are only the first max_rows")
        ] = None,
    ) -> AnalysisResult:
        """Summarize rows: counts, min/max/mean of numbers, frequent values, time spans and outliers."""
        return await service.analyze_results(rows, columns, analysis_prompt, truncated)

    return server
