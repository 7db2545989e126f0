"""The guard's rules: pure functions that return the reasons to reject, empty when satisfied.

Three stages, in the order `guard.py` runs them:

* text checks (`check_text`) on the raw string, before anything is tokenized;
* token checks (`check_nesting`, `check_token_forms`) on sqlglot's tokens, before parsing;
* AST rules (`RULES`), each `rule(statement, policy) -> list[str]`, over one parsed statement,
  plus `check_statement_count` over the whole list.

The AST rules walk the whole tree, not only the top-level statement, because PostgreSQL
allows writes inside a query (writable CTEs, `SELECT ... INTO`) and any expression may call
a function. Functions are checked against an allowlist: sqlglot turns the functions it knows
into typed nodes (`exp.Count`, `exp.TimestampTrunc`, ...) and everything else into
`exp.Anonymous`, so both forms have their own allowlist (in `builtins.py`). What a statement
does and which tables it names is read by `tree.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import Token, TokenType, exp

from . import references
from .builtins import (
    BUILTIN_EXTRA_TYPES,
    FUNCTION_SCHEMA,
    SOURCE_NAME_META,
    function_allowed,
    function_name,
    function_qualifier,
    is_case_variant_of_builtin,
    quoted_builtin_reason,
)
from .names import DEFAULT_SCHEMA, fold_identifier
from .policy import DEFAULT_MAX_NESTING_DEPTH, SqlPolicy
from .tree import (
    SESSION_OPERATIONS,
    identifier_name,
    is_read_query,
    lock_clause,
    operation_of,
    operations,
    statement_kind,
    table_references,
    unwrap,
)

#: A rule over one parsed statement.
Rule = Callable[[exp.Expression, SqlPolicy], list[str]]

_OPEN_BRACKETS = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE_BRACKETS = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})


# --- text and token checks (before parsing) ------------------------------------------------


def check_text(sql: str, policy: SqlPolicy) -> list[str]:
    """Reject empty text, NUL bytes and text over `policy.max_bytes` UTF-8 bytes."""
    if not isinstance(sql, str):
        return [f"SQL must be a string, got {type(sql).__name__}"]
    if not sql.strip():
        return ["SQL is empty"]
    if "\x00" in sql:
        return ["SQL contains a NUL byte"]
    try:
        size_bytes = len(sql.encode("utf-8"))
    except UnicodeEncodeError:
        return ["SQL is not valid Unicode text (it contains a lone surrogate)"]
    if size_bytes > policy.max_bytes:
        return [f"SQL is {size_bytes} bytes, over the limit of {policy.max_bytes} bytes"]
    return []


def check_nesting(tokens: Sequence[Token], max_depth: int = DEFAULT_MAX_NESTING_DEPTH) -> list[str]:
    """Reject nesting deeper than `max_depth` brackets, before the recursive parser sees it."""
    depth = deepest = 0
    for token in tokens:
        if token.token_type in _OPEN_BRACKETS:
            depth += 1
            deepest = max(deepest, depth)
        elif token.token_type in _CLOSE_BRACKETS:
            depth -= 1
    if deepest > max_depth:
        return [f"SQL is nested too deeply ({deepest} levels of brackets, the limit is {max_depth})"]
    return []


def check_token_forms(tokens: Sequence[Token]) -> list[str]:
    """Reject spellings the parser normalizes away: quoted built-in names, `U&"..."` identifiers."""
    reasons: list[str] = []
    for name, paren in zip(tokens, tokens[1:]):
        # sqlglot maps "FLOOR"(x) to the same node as floor(x), but PostgreSQL looks for a
        # function literally named FLOOR — never the built-in, possibly something user-made.
        if (
            name.token_type == TokenType.IDENTIFIER
            and paren.token_type == TokenType.L_PAREN
            and is_case_variant_of_builtin(name.text)
        ):
            reasons.append(quoted_builtin_reason(name.text))
    for first, amp, third in zip(tokens, tokens[1:], tokens[2:]):
        # U&"d\0061ta" names the identifier `data`, but sqlglot reads it as `U & "d\0061ta"`,
        # so the guard would compare the wrong name; refuse the form outright.
        if (
            first.token_type == TokenType.VAR
            and first.text.upper() == "U"
            and amp.token_type == TokenType.AMP
            and amp.start == first.end + 1
            and third.token_type == TokenType.IDENTIFIER
        ):
            reasons.append('Unicode-escaped identifiers (U&"...") are not allowed')
            break
    return reasons


def check_statement_count(statements: Sequence[exp.Expression]) -> list[str]:
    """Reject empty input (only comments) and more than one statement."""
    if not statements:
        return ["SQL is empty (no statement)"]
    if len(statements) > 1:
        return [f"only one statement is allowed, got {len(statements)}"]
    return []


# --- AST rules -------------------------------------------------------------------------------


def rule_read_only(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """In read-only mode, allow only a read query, with no write or lock anywhere inside."""
    if not policy.read_only:
        return []
    reasons: list[str] = []
    kind = statement_kind(statement, policy.dialect).upper()
    if not is_read_query(statement) and kind not in policy.denied_operations:
        reasons.append(f"statement type {kind} is not allowed in read-only mode (only SELECT queries are)")
    for op, node in operations(statement):
        if node is statement or node is unwrap(statement):
            continue
        if isinstance(node, exp.Into):
            reasons.append("SELECT INTO is not allowed in read-only mode (it creates a table)")
        elif op not in policy.denied_operations:
            reasons.append(f"{op} inside a query is not allowed in read-only mode")
    for lock in statement.find_all(exp.Lock):
        reasons.append(f"locking clause {lock_clause(lock)} is not allowed in read-only mode")
    return reasons


def rule_denied_operations(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Reject any denied operation anywhere in the tree (`DeLeTe` is DELETE; CTEs count)."""
    return [f"statement type {op} is denied" for op, _ in operations(statement) if op in policy.denied_operations]


def rule_unchecked_statements(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """With writes allowed, still refuse what the guard cannot see into or what escapes the session.

    Read-only mode refuses these already as non-SELECT statements.
    """
    if policy.read_only:
        return []
    reasons: list[str] = []
    if not is_read_query(statement) and operation_of(unwrap(statement)) is None:
        kind = statement_kind(statement, policy.dialect).upper()
        reasons.append(f"statement type {kind} is not recognised and is refused")
    for op, node in operations(statement):
        if op in policy.denied_operations:
            continue
        if isinstance(node, exp.Command):
            reasons.append(f"statement type {op} cannot be checked by the guard and is refused")
        elif op in SESSION_OPERATIONS:
            reasons.append(f"statement type {op} is refused (transaction control and session settings are not allowed)")
    return reasons


def rule_copy_targets(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse COPY to or from a program or a server-side file."""
    reasons: list[str] = []
    for copy in statement.find_all(exp.Copy):
        for target in copy.args.get("files") or []:
            word = identifier_name(target) if isinstance(target, exp.Identifier) else None
            if word == "program":
                reasons.append("COPY ... PROGRAM runs a shell command on the server and is not allowed")
            elif word not in ("stdin", "stdout"):
                reasons.append("COPY to or from a server file is not allowed")
    return reasons


def rule_functions(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Allow only built-in, side-effect-free functions, called unqualified or as pg_catalog.f."""
    reasons: list[str] = []
    for node in statement.walk():
        if not isinstance(node, exp.Func):
            continue
        name = None
        if not function_allowed(node):
            name = function_name(node, policy.dialect)
            written = node.meta.get(SOURCE_NAME_META)
            if isinstance(written, str) and written.startswith('"') and is_case_variant_of_builtin(name):
                reasons.append(quoted_builtin_reason(name))  # same text as check_token_forms gives
            else:
                reasons.append(f"function {name} is not allowed")
        qualifier = function_qualifier(node)
        if qualifier is not None and qualifier != FUNCTION_SCHEMA:
            name = name or function_name(node, policy.dialect)
            reasons.append(f"function {qualifier}.{name} is not allowed (only pg_catalog functions may be qualified)")
    return reasons


def rule_operators_and_types(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse `OPERATOR(schema.op)` outside pg_catalog and casts to user-defined types.

    Both run code the guard cannot see: an operator is a function, and a domain's CHECK
    constraint calls functions whenever a value is cast to it.
    """
    reasons: list[str] = []
    for node in statement.walk():
        if isinstance(node, exp.Operator):
            written = str(node.args.get("operator") or "")
            schema, _, _ = written.rpartition(".")
            if schema and fold_identifier(schema.strip('"'), quoted=schema.startswith('"')) != FUNCTION_SCHEMA:
                reasons.append(f"operator {written} is not allowed (only pg_catalog operators may be named)")
        elif isinstance(node, exp.DataType) and node.this == exp.DataType.Type.USERDEFINED:
            written = str(node.args.get("kind") or node.sql(dialect=policy.dialect))
            if fold_identifier(written, quoted=False) not in BUILTIN_EXTRA_TYPES:
                reasons.append(f"type {written} is not allowed (only built-in types may be used)")
    return reasons


def rule_allowed_tables(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """With an allowlist, every referenced table must be on it and in schema public; catalogs are
    refused (with an allowlist or `refuse_catalogs`) unless named in `allowed_catalog_tables`."""
    allowed = policy.allowed_tables
    if allowed is None and not policy.refuse_catalogs:
        return []
    listed = (", ".join(sorted(allowed)) or "none") if allowed is not None else ""
    reasons: list[str] = []
    for ref in table_references(statement):
        shown = ref.display()
        if ref.is_catalog:
            if shown not in policy.allowed_catalog_tables:
                reasons.append(f"catalog table '{shown}' is not allowed (an operator may enable it by name)")
            continue
        if allowed is None:
            continue
        if ref.catalog is not None:
            reasons.append(f"table '{shown}' names a database; only schema {DEFAULT_SCHEMA} may be used")
        elif shown in allowed:
            continue
        elif ref.effective_schema != DEFAULT_SCHEMA:
            reasons.append(f"table '{shown}' is not allowed: only schema {DEFAULT_SCHEMA} may be used")
        else:
            reasons.append(f"table '{shown}' is not in allowed tables ({listed})")
    return reasons


def rule_ambiguous_strings(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse plain string literals whose end depends on `standard_conforming_strings`.

    sqlglot reads '\\' as a one-character string (the PostgreSQL default); a server with the
    setting off reads the backslash as escaping the quote, and the rest of the text as code.
    """
    for node in statement.find_all(exp.Literal):
        if node.is_string and ("\\'" in node.this or node.this.endswith("\\")):
            return [
                "string literal with a backslash before a quote is ambiguous (it depends on standard_conforming_strings)"
            ]
    return []


#: The AST rules in the order their reasons are reported.
RULES: tuple[Rule, ...] = (
    rule_denied_operations,
    rule_read_only,
    rule_unchecked_statements,
    rule_copy_targets,
    rule_functions,
    rule_operators_and_types,
    rule_allowed_tables,
    rule_ambiguous_strings,
    references.rule_attribute_notation,
    references.rule_object_identifier_casts,
)
