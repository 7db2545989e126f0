"""Rules for the places where PostgreSQL calls a function without call syntax.

PostgreSQL reads *attribute notation* as a function call: `(expr).f` is `f(expr)` whenever
`expr` has no field `f`, for any expression (a literal, a cast, a function result, a row, a
subquery), and `t.f` is `f(t)` on the whole row when the FROM item `t` has no column `f`.
sqlglot parses these as field or column accesses, so the function allowlist never sees the
call: `select ('/etc/passwd').pg_read_file` ran `pg_read_file`. The rules here keep only
forms whose meaning the guard can pin down without the catalog:

* `name.column` where `name` is a table, alias, CTE or function alias visible in that query.
  If `column` is not a real column, PostgreSQL calls the function `column(name)` on the whole
  row (`u.row_to_json` is `row_to_json(u)`). Where the FROM item's columns are known (a table
  named in `SqlPolicy.table_columns`, or a CTE or subquery whose select list names its columns),
  a name that is none of them is judged as that call: allowed only for an allowed function. The
  built-ins that accept any row only compute values; what this closes is a user-defined function
  of the table's row type. Where the columns are not known the name is taken for a column;
* `schema.table.column` where `table` is visible and `schema` is not a FROM item name;
* qualified function calls `pg_catalog.f(...)` (the function rule checks `f`).

Everything else is refused whatever the name after the dot is: field access on a
parenthesised expression (`(x).f`, `(x).*`), four-part names, and qualifiers that are not a
visible FROM item (PostgreSQL rejects those today; refusing them keeps the guard from
depending on how a later version resolves them).

Casts to the `reg*` object-identifier types are refused too: their input functions look a
name up in the system catalogs, which bypasses the table allowlist's refusal of catalogs.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from .builtins import SAFE_FUNCTIONS, SYNTAX_CALL_WORDS
from .names import fold_identifier
from .policy import SqlPolicy
from .tree import table_name

_ATTRIBUTE_HINT = "PostgreSQL reads attribute notation x.f as the function call f(x)"

#: Scopes that see the FROM items of the scope around them (correlated subqueries, LATERAL,
#: the branches of a set operation inside such a subquery).
_INHERITING_SCOPES = frozenset({ScopeType.SUBQUERY, ScopeType.UDTF, ScopeType.SET_OPERATION})


def _folded(ident: exp.Expression | None) -> str | None:
    if isinstance(ident, exp.Identifier):
        return fold_identifier(ident.this, quoted=bool(ident.args.get("quoted")))
    return None


def _source_spellings(statement: exp.Expression) -> dict[str, set[str]]:
    """Map each written FROM-item name (as sqlglot keys scopes) to its folded forms.

    sqlglot keys a scope's sources by the raw text, losing whether the name was quoted;
    the folded forms come back from the identifiers that declared them.
    """
    spellings: dict[str, set[str]] = {}
    for node in statement.walk():
        ident: exp.Expression | None = None
        if isinstance(node, exp.TableAlias):
            ident = node.this
        elif isinstance(node, exp.Table) and not isinstance(node.args.get("alias"), exp.TableAlias):
            ident = node.this if isinstance(node.this, exp.Identifier) else None
            if isinstance(node.this, exp.Func):
                # `FROM generate_series(1, 3)` is named after its function.
                name = node.this.name or node.this.sql_name()
                spellings.setdefault(name, set()).add(fold_identifier(name, quoted=False))
        if isinstance(ident, exp.Identifier):
            folded = _folded(ident)
            if folded is not None:
                spellings.setdefault(ident.this, set()).add(folded)
    return spellings


def _names(keys: Iterable[str], spellings: dict[str, set[str]]) -> set[str]:
    names: set[str] = set()
    for key in keys:
        names |= spellings.get(key, {fold_identifier(key, quoted=False)})
    return names


def _visible(scope: Scope, spellings: dict[str, set[str]]) -> set[str]:
    names = _names(scope.sources, spellings)
    if scope.scope_type in _INHERITING_SCOPES and scope.parent is not None:
        names |= _visible(scope.parent, spellings)
    return names


def _sources(scope: Scope, spellings: dict[str, set[str]]) -> dict[str, object]:
    """Each visible FROM item's folded name -> its source (`exp.Table`, or the `Scope` of a CTE or subquery)."""
    sources: dict[str, object] = {}
    if scope.scope_type in _INHERITING_SCOPES and scope.parent is not None:
        sources.update(_sources(scope.parent, spellings))
    for key, source in scope.sources.items():
        for name in spellings.get(key, {fold_identifier(key, quoted=False)}):
            sources[name] = source
    return sources


def _output_name(select: exp.Expression) -> str | None:
    ident = select.args.get("alias") if isinstance(select, exp.Alias) else select.this
    if isinstance(select, (exp.Alias, exp.Column)):
        return _folded(ident)
    return None  # PostgreSQL names other expressions itself (`count`, `?column?`)


def _known_columns(source: object, policy: SqlPolicy) -> frozenset[str] | None:
    """The columns of a FROM item when the guard knows them all, else None."""
    if isinstance(source, exp.Table):
        name = table_name(source)
        return policy.columns_of(name.display()) if name is not None and name.schema != "?" else None
    if isinstance(source, Scope):
        selects = getattr(source.expression, "selects", None) or []
        names = [_output_name(s) for s in selects]
        if not names or None in names:
            return None
        return frozenset(n for n in names if n is not None)
    return None


def _row_call_reasons(column: exp.Column, table: str, known: frozenset[str] | None) -> list[str]:
    """`table.f` where `table`'s columns are known and `f` is none of them: the call `f(table)`."""
    name = _folded(column.this)
    if known is None or name is None or name in known:
        return []
    if name in SAFE_FUNCTIONS and name not in SYNTAX_CALL_WORDS:
        return []
    return [
        f"{column.sql(dialect='postgres')}: '{table}' has no column '{name}', so PostgreSQL calls "
        f"{name}({table}) ({_ATTRIBUTE_HINT}); function {name} is not allowed"
    ]


def _column_reasons(
    column: exp.Column, visible: set[str], sources: dict[str, object] | None = None, policy: SqlPolicy | None = None
) -> list[str]:
    shown = column.sql(dialect="postgres")
    if column.args.get("catalog") is not None:
        return [f"column reference {shown} has four parts; {_ATTRIBUTE_HINT}, so it is refused"]
    table = _folded(column.args.get("table"))
    if table is None:
        return []
    schema = _folded(column.args.get("db"))
    if schema is not None and schema in visible:
        return [f"field selection {shown} on a column is not allowed ({_ATTRIBUTE_HINT})"]
    if table not in visible:
        return [
            f"'{table}' in {shown} is not a table or alias of this query; {_ATTRIBUTE_HINT}, "
            "so only FROM items may qualify a column"
        ]
    if sources is not None and policy is not None and table in sources:
        return _row_call_reasons(column, table, _known_columns(sources[table], policy))
    return []


def _is_qualified_call(dot: exp.Dot) -> bool:
    return isinstance(dot.expression, exp.Func) and isinstance(dot.this, (exp.Identifier, exp.Var))


def rule_attribute_notation(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse attribute notation that PostgreSQL may turn into a function call (see module doc)."""
    reasons: list[str] = []
    for dot in statement.find_all(exp.Dot):
        if not _is_qualified_call(dot):
            reasons.append(
                f"attribute access {dot.sql(dialect='postgres')} is not allowed ({_ATTRIBUTE_HINT}); "
                "select a column of a FROM item instead"
            )
    spellings = _source_spellings(statement)
    checked: set[int] = set()
    try:
        scopes = traverse_scope(statement)
    except Exception:  # noqa: BLE001 — an unscoped statement falls back to the whole-statement check
        scopes = []
    for scope in scopes:
        visible = _visible(scope, spellings)
        sources = _sources(scope, spellings)
        for column in scope.columns:
            if id(column) in checked:
                continue
            checked.add(id(column))
            reasons.extend(_column_reasons(column, visible, sources, policy))
    # Columns no scope covers (DML statements, odd shapes): judge them against every FROM item
    # and DML target of the statement.
    everywhere = _names(spellings, spellings)
    for column in statement.find_all(exp.Column):
        if id(column) not in checked:
            reasons.extend(_column_reasons(column, everywhere))
    return reasons


def rule_object_identifier_casts(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse casts to `regclass`, `regproc` and the other reg* types (catalog lookups by name)."""
    reasons: list[str] = []
    for node in statement.find_all(exp.ObjectIdentifier, exp.DataType):
        if isinstance(node, exp.ObjectIdentifier):
            written = node.name
        elif node.this == exp.DataType.Type.USERDEFINED:
            written = str(node.args.get("kind") or "")
        else:
            continue
        if fold_identifier(written.strip('"'), quoted=False).startswith("reg"):
            reasons.append(
                f"cast to {written.lower()} is not allowed (its input function looks names up in the system catalogs)"
            )
    return reasons
