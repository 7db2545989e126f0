"""PostgreSQL identifier rules: case folding, qualified table names and their display form.

Unquoted identifiers fold to lower case, and only ASCII ``A-Z`` folds (PostgreSQL leaves
other letters alone in multi-byte encodings); quoted identifiers are kept exactly. Every
name the guard compares — allowlist entries, table references, CTE names, function
names — goes through these helpers so that both sides are folded the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The schema an unqualified name resolves to, and the only one an allowlist admits by default.
DEFAULT_SCHEMA = "public"

#: Schemas holding the system catalogs.
CATALOG_SCHEMAS = frozenset({"pg_catalog", "information_schema"})

#: Name prefixes of catalog relations outside those schemas (PostgreSQL's `pg_*` views are
#: found through the search path; SQLite's catalog is `sqlite_master` / `pragma_*`).
CATALOG_PREFIXES = ("pg_", "sqlite_", "pragma_")

_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_identifier(text: str, *, quoted: bool) -> str:
    """Apply PostgreSQL case folding: quoted names stay exact, unquoted ones fold ASCII A-Z only."""
    return text if quoted else text.translate(_ASCII_LOWER)


@dataclass(frozen=True)
class TableName:
    """A table name after folding; `schema` and `catalog` are None when not written."""

    name: str
    schema: str | None = None
    catalog: str | None = None

    @property
    def effective_schema(self) -> str:
        """The schema the name resolves to when none is written (`public`)."""
        return self.schema if self.schema is not None else DEFAULT_SCHEMA

    @property
    def is_catalog(self) -> bool:
        """True for system catalog relations: `pg_catalog.*`, `information_schema.*`, `pg_*`,
        and SQLite's `sqlite_*` tables and `pragma_*` table-valued functions."""
        return self.schema in CATALOG_SCHEMAS or self.name.startswith(CATALOG_PREFIXES)

    def display(self) -> str:
        """The normalized form used in decisions and allowlists: `public.` is left out."""
        parts = [self.name]
        if self.schema is not None and (self.schema != DEFAULT_SCHEMA or self.catalog is not None):
            parts.insert(0, self.schema)
        if self.catalog is not None:
            parts.insert(0, self.catalog)
        return ".".join(parts)


def split_qualified_name(text: str) -> list[tuple[str, bool]]:
    """Split `a."B".c` into `[("a", False), ("B", True), ("c", False)]`.

    Dots inside double quotes belong to the name, and `""` inside quotes is one quote.
    Raises ValueError for an unterminated quote or an empty part.
    """
    parts: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i < n and text[i] == '"':
            i += 1
            buf: list[str] = []
            while True:
                if i >= n:
                    raise ValueError(f"unterminated quoted identifier in {text!r}")
                if text[i] == '"':
                    if i + 1 < n and text[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                buf.append(text[i])
                i += 1
            part, quoted = "".join(buf), True
        else:
            start = i
            while i < n and text[i] != "." and not text[i].isspace():
                i += 1
            part, quoted = text[start:i], False
        while i < n and text[i].isspace():
            i += 1
        if not part:
            raise ValueError(f"empty name part in {text!r}")
        parts.append((part, quoted))
        if i >= n:
            return parts
        if text[i] != ".":
            raise ValueError(f"unexpected character {text[i]!r} in {text!r}")
        i += 1


def parse_table_name(text: str) -> TableName:
    """Parse a configured table name (`users`, `"Users"`, `public.users`) into a folded TableName."""
    parts = [fold_identifier(p, quoted=q) for p, q in split_qualified_name(text)]
    if len(parts) > 3:
        raise ValueError(f"too many name parts in {text!r}")
    name = parts[-1]
    schema = parts[-2] if len(parts) >= 2 else None
    catalog = parts[-3] if len(parts) == 3 else None
    return TableName(name=name, schema=schema, catalog=catalog)


def normalize_table_name(text: str) -> str:
    """The display form of a configured table name: `Public.Users` -> `users`, `"Users"` -> `Users`."""
    return parse_table_name(text).display()
