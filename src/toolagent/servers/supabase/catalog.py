"""`Catalog`: the live schema as the SQL generator sees it, plus the words that name it.

Built from what the backend introspects (`TableInfo` records and the distinct values of
low-cardinality text columns), never from a hard-coded schema. Names are matched word by
word after `stem`, so `conversations`, `conversation` and `agent_conversations` meet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from .models import TableInfo

ColumnKind = Literal["numeric", "temporal", "text", "boolean", "other"]

#: Name parts people leave out when they speak of a column (`user_id` is "user").
QUIET_NAME_PARTS = frozenset({"id", "at", "slug", "on"})
#: Table head words too generic to name a table alone (`kpi_data` needs "kpi").
GENERIC_HEADS = frozenset({"data", "info", "record", "item", "entry", "row", "detail", "stat", "log"})

_SYNONYMS = {
    "org": "organization",
    "organisation": "organization",
    "company": "organization",
    "msg": "message",
    "chat": "conversation",
    "customer": "user",
    "account": "user",
    "signup": "created",
    "signed": "created",
    "registered": "created",
    "joined": "created",
    "kpis": "kpi",
}


def stem(word: str) -> str:
    """A crude, deterministic stem: synonyms, plural and -ed/-ing endings removed, final e dropped."""
    w = word.lower()
    if w.endswith("'s"):
        w = w[:-2]
    w = _SYNONYMS.get(w, w)
    if len(w) > 3:
        if w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        w = _SYNONYMS.get(w, w)
        if w.endswith("ing") and len(w) > 5:
            w = w[:-3]
        elif w.endswith("ed") and len(w) > 4:
            w = w[:-2]
        if w.endswith("e") and len(w) > 3:
            w = w[:-1]
    return w


def name_words(name: str) -> tuple[str, ...]:
    """Stems of an identifier's parts (`message_count` -> `messag`, `count`)."""
    return tuple(stem(p) for p in re.split(r"[_\W]+", name.lower()) if p)


def column_kind(type_name: str) -> ColumnKind:
    """Classify a PostgreSQL type name."""
    t = type_name.lower()
    if t.startswith(("timestamp", "date", "timetz")) or t == "time":
        return "temporal"
    if t.startswith(("int", "bigint", "smallint", "numeric", "decimal", "real", "double", "float", "serial", "money")):
        return "numeric"
    if t.startswith(("bool",)):
        return "boolean"
    if t.startswith(("text", "varchar", "char", "citext", "character", "bpchar", "uuid")):
        return "text"
    return "other"


@dataclass(frozen=True)
class Column:
    """A column with what the generator needs to know about it."""

    table: str
    name: str
    type: str
    nullable: bool
    kind: ColumnKind
    is_key: bool
    """Primary key or foreign key: an identifier, not a quantity."""
    references: tuple[str, str] | None
    """(table, column) this column references, when it is a foreign key."""
    words: tuple[str, ...]
    core: tuple[str, ...]
    """`words` without the quiet parts (id, at, slug); what people say."""


@dataclass(frozen=True)
class Table:
    """A table with its columns and the words that name it."""

    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    row_count: int
    words: tuple[str, ...]

    @property
    def head(self) -> str:
        """The last name word (`conversation` for agent_conversations)."""
        return self.words[-1]

    def column(self, name: str) -> Column:
        """The column called `name` (KeyError when there is none)."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def main_date(self) -> Column | None:
        """The column "by date" means: the first non-null timestamp, else the first timestamp."""
        temporal = [c for c in self.columns if c.kind == "temporal"]
        return next((c for c in temporal if not c.nullable), temporal[0] if temporal else None)

    @property
    def label(self) -> Column:
        """The column that names a row for people (name, title, email...), else the primary key."""
        text = [c for c in self.columns if c.kind == "text" and not c.is_key]
        for preferred in ("name", "title", "email", "full_name", "slug", "label"):
            for c in text:
                if c.name == preferred:
                    return c
        for c in text:
            if c.name.endswith(("_name", "_title")):
                return c
        pk = [c for c in self.columns if c.name in self.primary_key]
        return text[0] if text else (pk[0] if pk else self.columns[0])

    @property
    def order_key(self) -> tuple[Column, ...]:
        """Columns that make an ordering deterministic (the primary key)."""
        return tuple(c for c in self.columns if c.name in self.primary_key)


@dataclass(frozen=True)
class Catalog:
    """Tables the generator may use, and the known values of their categorical columns."""

    tables: Mapping[str, Table]
    values: Mapping[tuple[str, str], tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_schema(
        cls, tables: Iterable[TableInfo], values: Mapping[tuple[str, str], tuple[str, ...]] | None = None
    ) -> Catalog:
        """Build from introspected tables and category values."""
        built: dict[str, Table] = {}
        for info in tables:
            refs = {fk.column: (fk.references_table, fk.references_column) for fk in info.foreign_keys}
            columns = []
            for c in info.columns:
                words = name_words(c.name)
                core = tuple(w for w in words if w not in QUIET_NAME_PARTS) or words
                columns.append(
                    Column(
                        table=info.name,
                        name=c.name,
                        type=c.type,
                        nullable=c.nullable,
                        kind=column_kind(c.type),
                        is_key=c.name in info.primary_key or c.name in refs,
                        references=refs.get(c.name),
                        words=words,
                        core=core,
                    )
                )
            built[info.name] = Table(
                name=info.name,
                columns=tuple(columns),
                primary_key=tuple(info.primary_key),
                row_count=info.row_count,
                words=name_words(info.name),
            )
        return cls(tables=built, values=dict(values or {}))

    def restrict(self, names: Iterable[str]) -> Catalog:
        """Only the named tables (and their values)."""
        keep = set(names)
        return Catalog(
            tables={n: t for n, t in self.tables.items() if n in keep},
            values={k: v for k, v in self.values.items() if k[0] in keep},
        )

    def outgoing(self, table: Table) -> list[tuple[Column, Table]]:
        """(foreign key column, referenced table) for each reference to a table in the catalog."""
        return [
            (c, self.tables[c.references[0]])
            for c in table.columns
            if c.references is not None and c.references[0] in self.tables and c.references[0] != table.name
        ]
