"""Hot statements compiled once per dialect and set of keys, then run on the driver's cursor.

Every governed call runs about ten statements (admission, outcome, audit rows, totals).
Executing a Core statement makes SQLAlchemy look up its compiled form, build an execution
context and process each parameter: about 50 µs a statement on this machine's SQLite; even
`Connection.exec_driver_sql` builds an execution context and a result, about 20 µs over the
driver's own few µs. `Prepared` keeps the Core statement as the one definition of the SQL and
its types: it compiles it once for the connection's dialect and the keys given, and then only
converts each parameter with its column type's own bind processor (the same conversion
SQLAlchemy applies: JSON to text, datetimes to SQLite's format) before handing the row to a
cursor of the connection's DBAPI connection. The statement runs in the caller's transaction, as
`conn.execute` would (SQLAlchemy began it on that same DBAPI connection). A driver error is
raised as SQLAlchemy's wrapper of it (`sqlalchemy.exc.DBAPIError.instance`), as `conn.execute`
would raise it, so `Database` translates it the same way.

Rows come back as named tuples, each column converted by its type's own result processor (JSON
text to data, SQLite's datetime text to a datetime), as SQLAlchemy would return them.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.sql.compiler import SQLCompiler

T = TypeVar("T")
#: One bind of a compiled form (see `_Form.binds`).
_Bind = tuple[str, str | None, Any, Callable[[Any], Any] | None, Any]


@dataclass(frozen=True)
class _Form:
    """One compiled form: the SQL text and how a parameter mapping becomes the driver's row."""

    sql: str
    binds: tuple[_Bind, ...]
    """Per bind, in placeholder order: its name, the key it takes its value from (None: the fixed
    value the statement holds, e.g. a status literal, already converted), that value, its type's
    processor (None: the value goes as it is), and the driver's value for None."""
    positional: bool

    def row(self, params: Mapping[str, Any]) -> Any:
        # A None is never handed to a processor: its driver value was learnt once (`_binds`).
        values = [
            fixed
            if key is None
            else params[key]
            if process is None
            else none
            if (value := params[key]) is None
            else process(value)
            for _name, key, fixed, process, none in self.binds
        ]
        return tuple(values) if self.positional else {b[0]: v for b, v in zip(self.binds, values, strict=True)}


def _binds(compiled: SQLCompiler, dialect: sa.Dialect, keys: tuple[str, ...]) -> tuple[_Bind, ...] | None:
    """Where each bind's value comes from, learnt by running the compiler's own `construct_params`
    once over markers; None when a value does not come from a key or a fixed value. A fixed
    value is converted here, once, and so is None (JSON's is the text `null`), since a
    processor gives the same for the same value."""
    markers = {k: object() for k in keys}
    by_marker = {id(m): k for k, m in markers.items()}
    values = compiled.construct_params(markers)
    names = list(compiled.positiontup or ()) if compiled.positional else list(values)
    binds: list[_Bind] = []
    for name in names:
        value = values[name]
        key = by_marker.get(id(value))
        if key is None and callable(getattr(compiled.binds[name], "callable", None)):
            return None  # a value computed per execution
        process = compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
        if key is None:
            binds.append((name, None, value if process is None else process(value), None, None))
        else:
            binds.append((name, key, None, process, None if process is None else process(None)))
    return tuple(binds)


class DriverResult:
    """What a statement run on the driver's cursor returned: the rows it affected and its rows, the
    few parts of SQLAlchemy's result that the store's hot verbs read."""

    __slots__ = ("rowcount", "_rows")

    def __init__(self, rowcount: int, rows: list[Any]) -> None:
        self.rowcount = rowcount
        self._rows = rows

    def first(self) -> Any:
        """The first row (its columns by name and by position), or None."""
        return self._rows[0] if self._rows else None

    def scalar(self) -> Any:
        """The first column of the first row, or None."""
        return self._rows[0][0] if self._rows else None

    def __iter__(self) -> Any:
        return iter(self._rows)


def _on_driver_cursor(conn: sa.Connection, sql: str, driver_params: Any, run: Callable[[Any], T]) -> T:
    """`run(cursor)` on a cursor of the connection's DBAPI connection, inside SQLAlchemy's
    transaction; a driver error is raised as SQLAlchemy's wrapper of it, as `conn.execute` would."""
    cursor = conn.connection.cursor()  # the pool's proxy: its DBAPI connection's cursor
    try:
        return run(cursor)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise sa.exc.DBAPIError.instance(
            sql, driver_params, exc, conn.dialect.loaded_dbapi.Error, dialect=conn.dialect
        ) from exc
    finally:
        cursor.close()


class Prepared:
    """A Core statement run through the driver (see the module docstring)."""

    def __init__(self, statement: sa.Executable) -> None:
        self.statement = statement
        self._forms: dict[tuple[type, tuple[str, ...]], _Form | None] = {}
        self._readers: dict[
            tuple[type, tuple[str, ...]], tuple[type[Any], tuple[Callable[[Any], Any] | None, ...]]
        ] = {}

    def execute(self, conn: sa.Connection, params: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> Any:
        """Run with one parameter mapping, or many (each with the same keys) as one executemany.

        Returns:
            A `DriverResult`, or SQLAlchemy's own result for a statement this class does not
            prepare: either way `rowcount`, `first()`, `scalar()` and iteration.
        """
        one = isinstance(params, Mapping)
        rows: list[Mapping[str, Any]] = [params] if isinstance(params, Mapping) else list(params)
        form = self._form(conn.dialect, tuple(rows[0]))
        if form is None:  # a form this class does not handle: SQLAlchemy's own path
            return conn.execute(self.statement, rows[0] if one else rows)
        driver_params = form.row(rows[0]) if one else [form.row(r) for r in rows]

        def run(cursor: Any) -> DriverResult:
            if one:
                cursor.execute(form.sql, driver_params)
            else:
                cursor.executemany(form.sql, driver_params)
            found = cursor.fetchall() if cursor.description else []
            if found:
                found = self._rows(conn.dialect, cursor.description, found)
            return DriverResult(cursor.rowcount, found)

        return _on_driver_cursor(conn, form.sql, driver_params, run)

    def execute_each(self, conn: sa.Connection, params: Sequence[Mapping[str, Any]]) -> list[int]:
        """Run once per parameter mapping (each with the same keys); returns each run's rowcount.

        On PostgreSQL several runs go in one pipeline (one round trip, psycopg's `executemany`
        keeping each statement's result); otherwise (SQLite, in process, or a single run, for which
        entering and leaving a pipeline costs more than it saves) each is an `execute`.
        """
        form = (
            self._form(conn.dialect, tuple(params[0]))
            if len(params) > 1 and conn.dialect.name == "postgresql"
            else None
        )
        if form is None:
            return [self.execute(conn, p).rowcount for p in params]
        driver_params = [form.row(p) for p in params]

        def run(cursor: Any) -> list[int]:
            cursor.executemany(form.sql, driver_params, returning=True)
            counts = [cursor.rowcount]
            while cursor.nextset():
                counts.append(cursor.rowcount)
            return counts

        return _on_driver_cursor(conn, form.sql, driver_params, run)

    def _rows(self, dialect: sa.Dialect, description: Sequence[Any], found: list[Any]) -> list[Any]:
        """The driver's rows as named tuples, each value through its column type's result processor
        (made, as SQLAlchemy makes it, for the driver's type code of the column)."""
        names = tuple(d[0] for d in description)
        reader = self._readers.get((type(dialect), names))
        if reader is None:
            columns = list(getattr(self.statement, "exported_columns", ()))
            processors: tuple[Callable[[Any], Any] | None, ...] = ()
            if len(columns) == len(names):
                processors = tuple(
                    c.type.dialect_impl(dialect).result_processor(dialect, d[1])
                    for c, d in zip(columns, description, strict=True)
                )
            # The field names are the statement's columns, known only here: mypy wants a literal.
            row_type = namedtuple("Row", names)  # type: ignore[misc]  # noqa: PYI024
            reader = self._readers[(type(dialect), names)] = (row_type, processors if any(processors) else ())
        row_class, processors = reader
        if not processors:
            return [row_class._make(r) for r in found]
        return [
            row_class._make([v if f is None or v is None else f(v) for f, v in zip(processors, r, strict=True)])
            for r in found
        ]

    def _form(self, dialect: sa.Dialect, keys: tuple[str, ...]) -> _Form | None:
        slot = (type(dialect), keys)
        if slot in self._forms:
            return self._forms[slot]
        assert isinstance(self.statement, sa.ClauseElement)  # every Core statement is one
        compiled = self.statement.compile(dialect=dialect, column_keys=list(keys))
        assert isinstance(compiled, SQLCompiler)
        form: _Form | None = None
        # Escaped bind names, expanding (IN-list) parameters and Python-side column defaults are
        # handled per execution by SQLAlchemy: such statements keep its path.
        plain = not (
            compiled.escaped_bind_names
            or compiled.insert_prefetch
            or compiled.update_prefetch
            or any(b.expanding for b in compiled.binds.values())
        )
        if plain:
            binds = _binds(compiled, dialect, keys)
            if binds is not None:
                form = _Form(compiled.string, binds, bool(compiled.positional))
        self._forms[slot] = form
        return form


__all__ = ["Prepared"]
