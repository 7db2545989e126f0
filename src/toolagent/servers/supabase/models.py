"""The tools' results. MCPServer turns each return type into the tool's outputSchema and
returns the value as structuredContent, so these field names are the wire contract.

Chaining: a runner fills a required argument left unset from the previous step's result
field of the same name, so `generate-sql` returns `sql` (which `execute-sql` requires) and
`execute-sql` returns `columns` and `rows` (which `analyze-results` takes).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ColumnInfo(BaseModel):
    """One column of a table."""

    name: str
    type: str = Field(description="PostgreSQL type name, e.g. integer, text, numeric, timestamptz")
    nullable: bool


class ForeignKeyInfo(BaseModel):
    """A column that references a column of another table."""

    column: str
    references_table: str
    references_column: str


class TableInfo(BaseModel):
    """One table: columns in declared order, keys and an (approximate) row count."""

    name: str
    columns: list[ColumnInfo]
    primary_key: list[str]
    foreign_keys: list[ForeignKeyInfo]
    row_count: int = Field(description="Rows in the table; may be an estimate on large PostgreSQL tables")

    def column(self, name: str) -> ColumnInfo | None:
        """The column called `name`, or None."""
        return next((c for c in self.columns if c.name == name), None)


class SchemaResult(BaseModel):
    """Result of get-schema."""

    tables: list[TableInfo]
    dialect: Literal["postgres"] = Field(
        default="postgres", description="SQL dialect generate-sql writes and execute-sql accepts"
    )
    backend: Literal["embedded", "postgres", "supabase"] = Field(
        description="embedded: the SQLite demo database; postgres: SUPABASE_DB_URL; supabase: SUPABASE_URL over HTTPS"
    )


class GeneratedSql(BaseModel):
    """Result of generate-sql."""

    sql: str = Field(description="One read-only PostgreSQL SELECT with a LIMIT; passed the SQL guard")
    tables: list[str] = Field(description="Tables the statement reads")
    explanation: str = Field(description="What the statement computes, in plain words")


class QueryResult(BaseModel):
    """Result of execute-sql. `rows` is a list of objects keyed by column name."""

    columns: list[str] = Field(description="Column names in result order")
    rows: list[dict[str, Any]] = Field(
        description="One object per row, keyed by column name; timestamps are ISO 8601 strings, numerics are numbers"
    )
    row_count: int = Field(description="Rows returned (at most max_rows)")
    truncated: bool = Field(description="True when rows were left out (see truncated_reason)")
    truncated_reason: Literal["max_rows", "max_result_bytes"] | None = Field(
        None, description="Why rows or values were left out: more than max_rows rows, or more than max_result_bytes"
    )
    result_bytes: int = Field(0, description="Bytes of rows seen (as JSON), the first left-out row included")
    max_result_bytes: int | None = Field(None, description="The server's cap on result bytes")
    oversized_values: int = Field(0, description="Values larger than max_result_bytes, returned as null")


class ValueCount(BaseModel):
    """A value and how often it occurs."""

    value: str
    count: int


class Outlier(BaseModel):
    """A numeric value far from the rest of its column."""

    row: int = Field(description="0-based row index")
    value: float
    z_score: float | None = Field(default=None, description="Standard scores from the mean, when defined")


class ColumnStats(BaseModel):
    """Statistics of one column."""

    name: str
    kind: Literal["numeric", "datetime", "text", "boolean", "empty"]
    count: int = Field(description="Non-null values")
    nulls: int
    distinct: int
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    median: float | None = None
    stddev: float | None = Field(default=None, description="Population standard deviation")
    sum: float | None = None
    outliers: list[Outlier] = Field(default_factory=list)
    top_values: list[ValueCount] = Field(default_factory=list, description="Most frequent values (text, boolean)")
    earliest: str | None = None
    latest: str | None = None
    span_days: float | None = None


class AnalysisStats(BaseModel):
    """Statistics over all rows."""

    row_count: int
    columns: list[ColumnStats]


class AnalysisResult(BaseModel):
    """Result of analyze-results."""

    summary: str = Field(description="Markdown summary: row count, per-column highlights, outliers")
    stats: AnalysisStats
