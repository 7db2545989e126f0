"""`SqlGuard`: parse SQL with sqlglot and run the rules of `rules.py` over it.

This is the one place where sqlglot's exceptions (ParseError, TokenError, and RecursionError
from its recursive parser) are translated; `check` turns them into a reject decision and
`enforce` raises `SqlRejected`.
"""

from __future__ import annotations

import contextvars
import logging
import re
from collections.abc import Sequence

from sqlglot import Token, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError

from ..errors import SqlRejected
from . import rules
from .builtins import SOURCE_NAME_META
from .policy import DEFAULT_MAX_NESTING_DEPTH, SqlDecision, SqlPolicy
from .tree import statement_kind, table_references

_TOO_DEEP = "SQL is nested too deeply for the parser"

#: What sqlglot returns for an empty statement between semicolons (`;;`, a trailing comment).
_EMPTY_STATEMENTS = tuple(getattr(exp, name) for name in ("Semicolon",) if hasattr(exp, name))

# sqlglot logs a warning whenever it falls back to an opaque Command (VACUUM, DO, ...). The
# guard reports those statements itself, so the warning is only noise on the CLI's stderr.
_GUARD_PARSING: contextvars.ContextVar[bool] = contextvars.ContextVar("toolagent_sql_guard_parsing", default=False)


class _QuietWhileGuarding(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _GUARD_PARSING.get()


logging.getLogger("sqlglot").addFilter(_QuietWhileGuarding())

_EXPLAIN_OPTION = re.compile(r"\s*(?:analy[sz]e|verbose)\b", re.IGNORECASE)
_TOKEN_REPR = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+.*?>")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _describe_parse_error(exc: ParseError) -> str:
    errors = getattr(exc, "errors", None) or []
    if not errors:
        return _ANSI.sub("", str(exc)).splitlines()[0] if str(exc) else "invalid SQL"
    first = errors[0]
    description = _TOKEN_REPR.sub(
        lambda m: "end of input" if m.group(1) == "SENTINEL" else repr(m.group(2)),
        str(first.get("description") or "invalid SQL"),
    )
    where = f" at line {first.get('line')}, column {first.get('col')}" if first.get("line") else ""
    near = first.get("highlight")
    return f"{description}{where}" + (f" near {near!r}" if near else "")


def _record_function_names(statement: exp.Expression, sql: str) -> None:
    """Keep each function's name as written (sqlglot keeps only the node type it maps it to).

    The parser stores the name token's position in `meta`; the rules read the text back
    from `meta[SOURCE_NAME_META]`.
    """
    for node in statement.walk():
        if isinstance(node, exp.Func):
            start, end = node.meta.get("start"), node.meta.get("end")
            if isinstance(start, int) and isinstance(end, int) and 0 <= start <= end < len(sql):
                node.meta[SOURCE_NAME_META] = sql[start : end + 1]


class SqlGuard:
    """Decide whether a SQL text may run under a `SqlPolicy`."""

    def __init__(self, policy: SqlPolicy = SqlPolicy()) -> None:
        self.policy = policy
        self._dialect = Dialect.get_or_raise(policy.dialect)

    def check(self, sql: str) -> SqlDecision:
        """Return the decision for `sql`; bad or hostile input gives a reject, never an exception."""
        reasons = rules.check_text(sql, self.policy)
        if reasons:
            return SqlDecision("reject", tuple(reasons), (), None)
        token_reasons: list[str] = []
        try:
            tokens = self._tokenize(sql)
            reasons = rules.check_nesting(tokens, DEFAULT_MAX_NESTING_DEPTH)
            if reasons:
                return SqlDecision("reject", tuple(reasons), (), None)
            token_reasons = rules.check_token_forms(tokens)
            statements = self._parse(tokens, sql)
        except SqlRejected as exc:
            return SqlDecision("reject", tuple(dict.fromkeys([*token_reasons, *exc.reasons])), (), None)
        try:
            return self._decide(statements, token_reasons)
        except RecursionError:
            return SqlDecision("reject", (_TOO_DEEP,), (), None)
        except Exception as exc:  # noqa: BLE001 — a guard that crashes must still say no
            return SqlDecision("reject", (f"SQL could not be checked: {type(exc).__name__}: {exc}",), (), None)

    def enforce(self, sql: str) -> SqlDecision:
        """Return the decision when `sql` is allowed; raise `SqlRejected` with its reasons otherwise."""
        decision = self.check(sql)
        if not decision.allowed:
            raise SqlRejected(list(decision.reasons))
        return decision

    # -- parsing: the one place sqlglot's exceptions are translated ---------------------------

    def _tokenize(self, sql: str) -> list[Token]:
        try:
            return list(self._dialect.tokenize(sql))
        except TokenError as exc:
            raise SqlRejected([f"could not parse SQL: {_ANSI.sub('', str(exc))}"]) from exc
        except RecursionError as exc:
            raise SqlRejected([_TOO_DEEP]) from exc

    def _parse(self, tokens: Sequence[Token], sql: str) -> list[exp.Expression]:
        marker = _GUARD_PARSING.set(True)
        try:
            parsed = self._dialect.parser().parse(list(tokens), sql)
        except ParseError as exc:
            raise SqlRejected([f"could not parse SQL: {_describe_parse_error(exc)}"]) from exc
        except TokenError as exc:
            raise SqlRejected([f"could not parse SQL: {_ANSI.sub('', str(exc))}"]) from exc
        except RecursionError as exc:
            raise SqlRejected([_TOO_DEEP]) from exc
        except Exception as exc:  # noqa: BLE001 — sqlglot bugs on odd input must not let SQL through
            raise SqlRejected([f"could not parse SQL: {type(exc).__name__}: {exc}"]) from exc
        finally:
            _GUARD_PARSING.reset(marker)
        # Empty statements (`;;`, a lone comment) come back as None or Semicolon nodes.
        statements = [s for s in parsed if isinstance(s, exp.Expression) and not isinstance(s, _EMPTY_STATEMENTS)]
        for statement in statements:
            _record_function_names(statement, sql)
        return statements

    def _explained_statement(self, statement: exp.Expression) -> exp.Expression | None:
        """The statement inside `EXPLAIN [ANALYZE] [VERBOSE] [(options)] stmt`, when it parses."""
        if not isinstance(statement, exp.Command) or str(statement.this).upper() != "EXPLAIN":
            return None
        text = statement.expression.name if isinstance(statement.expression, exp.Expression) else ""
        while True:
            text = text.lstrip()
            if text.startswith("("):
                end = text.find(")")
                if end < 0:
                    return None
                text = text[end + 1 :]
                continue
            match = _EXPLAIN_OPTION.match(text)
            if not match:
                break
            text = text[match.end() :]
        try:
            inner = self._parse(self._tokenize(text), text)
        except SqlRejected:
            return None
        return inner[0] if len(inner) == 1 else None

    # -- rules --------------------------------------------------------------------------------

    def _decide(self, statements: list[exp.Expression], token_reasons: list[str]) -> SqlDecision:
        reasons: list[str] = [*token_reasons, *rules.check_statement_count(statements)]
        tables: set[str] = set()
        for statement in statements:
            for rule in rules.RULES:
                reasons.extend(rule(statement, self.policy))
            tables.update(ref.display() for ref in table_references(statement))
            explained = self._explained_statement(statement)
            if explained is not None:
                # EXPLAIN ANALYZE runs its statement: report what that statement would do.
                reasons.extend(rules.rule_denied_operations(explained, self.policy))
        if len(statements) == 1:
            kind: str | None = statement_kind(statements[0], self.policy.dialect)
        else:
            kind = "multiple" if statements else None
        unique = tuple(dict.fromkeys(reasons))
        return SqlDecision("reject" if unique else "allow", unique, tuple(sorted(tables)), kind)


def check_sql(sql: str, policy: SqlPolicy | None = None) -> SqlDecision:
    """Check `sql` against `policy` (the default read-only policy when None)."""
    return SqlGuard(policy if policy is not None else SqlPolicy()).check(sql)
