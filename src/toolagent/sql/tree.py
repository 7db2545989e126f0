"""Reading a parsed statement: what it does (`operation_of`, `statement_kind`), which base
tables it names (`table_references`, with CTE names resolved per scope), and how identifiers
fold. Pure functions over sqlglot's tree; the rules in `rules.py` judge what these report.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot import exp

from .names import TableName, fold_identifier

#: Statement nodes and the operation name they perform (matched against `denied_operations`).
_OPERATION_NODE_NAMES = {
    "Insert": "INSERT",
    "Update": "UPDATE",
    "Delete": "DELETE",
    "Merge": "MERGE",
    "Drop": "DROP",
    "TruncateTable": "TRUNCATE",
    "Alter": "ALTER",
    "AlterRename": "ALTER",
    "Create": "CREATE",
    "Comment": "COMMENT",
    "Grant": "GRANT",
    "Revoke": "REVOKE",
    "Copy": "COPY",
    "Set": "SET",
    "Transaction": "BEGIN",
    "Commit": "COMMIT",
    "Rollback": "ROLLBACK",
    "Analyze": "ANALYZE",
    "Use": "USE",
    "Pragma": "PRAGMA",
    "Describe": "DESCRIBE",
    "LoadData": "LOAD",
    "Refresh": "REFRESH",
    "Cache": "CACHE",
    "Uncache": "UNCACHE",
    "Kill": "KILL",
}
OPERATION_NODES: dict[type[exp.Expr], str] = {
    getattr(exp, name): op for name, op in _OPERATION_NODE_NAMES.items() if hasattr(exp, name)
}

#: Operations refused even when writes are allowed: they end or reshape the transaction or
#: session the caller set up around the statement (a read-only transaction, a role, a timeout).
SESSION_OPERATIONS = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "SET", "RESET", "DISCARD"}
)

READ_QUERY_NODES: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values)


LEADING_WORD = re.compile(r'\s*"?([A-Za-z_][A-Za-z0-9_$]*)')


# --- helpers over the AST ------------------------------------------------------------------


def unwrap(statement: exp.Expression) -> exp.Expression:
    while isinstance(statement, exp.Subquery) and isinstance(statement.this, exp.Expression):
        statement = statement.this
    return statement


def is_read_query(statement: exp.Expression) -> bool:
    """True for SELECT, set operations (UNION/INTERSECT/EXCEPT) and VALUES, also parenthesized."""
    return isinstance(unwrap(statement), READ_QUERY_NODES)


def leading_word(text: str) -> str | None:
    match = LEADING_WORD.match(text)
    return match.group(1) if match else None


def operation_of(node: exp.Expr) -> str | None:
    """The operation a node performs (`DELETE`, `CREATE`, `VACUUM`...), None for a plain expression."""
    if isinstance(node, exp.Command):
        return (leading_word(str(node.this)) or "COMMAND").upper()
    op = OPERATION_NODES.get(type(node))
    if op is not None:
        return op
    if isinstance(node, exp.Into):
        return "CREATE"  # SELECT ... INTO creates a table
    if isinstance(node, exp.When) and isinstance(node.args.get("then"), exp.Var):
        # MERGE ... WHEN MATCHED THEN DELETE keeps the action as a bare keyword.
        if (leading_word(node.args["then"].name) or "").upper() == "DELETE":
            return "DELETE"
    if isinstance(node, exp.OnConflict) and "UPDATE" in str(node.args.get("action") or "").upper():
        return "UPDATE"  # INSERT ... ON CONFLICT DO UPDATE
    return None


def operations(statement: exp.Expression) -> Iterator[tuple[str, exp.Expr]]:
    """Every (operation, node) anywhere in the tree, the top-level statement included."""
    for node in statement.walk():
        op = operation_of(node)
        if op is not None:
            yield op, node


def statement_kind(statement: exp.Expression, dialect: str = "postgres") -> str:
    """The lower-case kind of a statement: `select`, `union`, `values`, `delete`, `vacuum`..."""
    inner = unwrap(statement)
    if isinstance(inner, READ_QUERY_NODES):
        return inner.key
    op = operation_of(inner)
    if op is not None:
        return op.lower()
    # sqlglot reads some commands it does not know (LISTEN x, CHECKPOINT) as bare expressions;
    # their first word is the command.
    word = leading_word(inner.sql(dialect=dialect))
    return word.lower() if word else inner.key


def identifier_name(node: exp.Expression | str | None) -> str | None:
    if isinstance(node, exp.Identifier):
        return fold_identifier(node.this, quoted=bool(node.args.get("quoted")))
    if isinstance(node, str):
        return fold_identifier(node, quoted=False)
    return None


def table_name(table: exp.Table) -> TableName | None:
    """The folded name of a table reference, None for a table function (`generate_series(...)`)."""
    this = table.this
    if isinstance(this, exp.Identifier):
        return TableName(
            name=fold_identifier(this.this, quoted=bool(this.args.get("quoted"))),
            schema=identifier_name(table.args.get("db")),
            catalog=identifier_name(table.args.get("catalog")),
        )
    if this is None or isinstance(this, (exp.Func, exp.Subquery, exp.Query, exp.Lateral, exp.Unnest)):
        return None
    # Some shape we do not model (deeper dotted names): keep its text, so an allowlist refuses it.
    return TableName(name=this.sql(), schema="?")


def cte_name(cte: exp.CTE) -> str | None:
    alias = cte.args.get("alias")
    return identifier_name(alias.this) if isinstance(alias, exp.TableAlias) else None


def table_references(statement: exp.Expression) -> list[TableName]:
    """Base tables referenced anywhere in the tree, in order, with CTE names resolved per scope.

    A CTE hides a same-named unqualified table only where it is visible: in the main query of
    its WITH (and in subqueries there), in later CTEs of the same WITH, and — for WITH
    RECURSIVE — in every CTE of that WITH. Elsewhere the name means the real table.
    """
    refs: list[TableName] = []
    # Iterative, so a tall tree (x+x+x+...) cannot exhaust the Python stack here.
    stack: list[tuple[exp.Expression, frozenset[str]]] = [(statement, frozenset())]
    while stack:
        node, visible = stack.pop()
        if isinstance(node, exp.Lock):
            continue  # FOR UPDATE OF x names a FROM item (often an alias), not a table
        with_ = node.args.get("with_") or node.args.get("with")
        if isinstance(with_, exp.With):
            ctes = [c for c in with_.expressions if isinstance(c, exp.CTE)]
            names = [n for n in (cte_name(c) for c in ctes) if n is not None]
            in_main = visible | frozenset(names)
            seen = visible
            for cte in ctes:
                body_scope = in_main if with_.args.get("recursive") else seen
                if isinstance(cte.this, exp.Expression):
                    stack.append((cte.this, body_scope))
                name = cte_name(cte)
                if name is not None:
                    seen = seen | {name}
            for value in node.args.values():
                if value is with_:
                    continue
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, exp.Expression):
                        stack.append((child, in_main))
            continue
        if isinstance(node, exp.Table):
            table = table_name(node)
            if table is not None and not (table.schema is None and table.catalog is None and table.name in visible):
                refs.append(table)
        for child in node.iter_expressions():
            stack.append((child, visible))
    return refs


def lock_clause(lock: exp.Lock) -> str:
    update, key = bool(lock.args.get("update")), bool(lock.args.get("key"))
    if update:
        return "FOR NO KEY UPDATE" if key else "FOR UPDATE"
    return "FOR KEY SHARE" if key else "FOR SHARE"
