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
`exp.Anonymous`, so both forms have their own allowlist below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from . import references
from .names import DEFAULT_SCHEMA, TableName, fold_identifier
from .policy import DEFAULT_MAX_NESTING_DEPTH, SqlPolicy

#: A rule over one parsed statement.
Rule = Callable[[exp.Expression, SqlPolicy], list[str]]

#: PostgreSQL built-in functions that only compute a value from their arguments: no I/O,
#: no waiting, no settings, no access to other tables or sessions. Names are folded
#: (lower-case). Anything else — pg_sleep, pg_read_file, lo_*, dblink*, set_config,
#: current_setting, query_to_xml, nextval, user-defined functions — is refused. `row`, `all`,
#: `any` and `some` are reserved words that sqlglot sometimes reads as calls (`ROW(1, 2)`,
#: `x = ALL(ARRAY[...])`); only their quoted forms could name a user function, and those
#: are refused (see `_SYNTAX_CALL_WORDS`).
SAFE_FUNCTIONS: frozenset[str] = frozenset(
    """
    count sum avg min max array_agg string_agg bool_and bool_or every bit_and bit_or bit_xor
    stddev stddev_pop stddev_samp variance var_pop var_samp corr covar_pop covar_samp
    regr_slope regr_intercept regr_r2 regr_count regr_avgx regr_avgy regr_sxx regr_syy regr_sxy
    percentile_cont percentile_disc mode json_agg jsonb_agg json_object_agg jsonb_object_agg
    any_value
    row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value
    nth_value
    abs ceil ceiling floor round trunc sign sqrt cbrt power pow exp ln log log10 mod div
    greatest least pi degrees radians random width_bucket gcd lcm scale trim_scale
    sin cos tan asin acos atan atan2 sinh cosh tanh num_nulls num_nonnulls
    lower upper initcap length char_length character_length octet_length bit_length
    substring substr trim btrim ltrim rtrim lpad rpad concat concat_ws replace reverse left
    right position strpos split_part starts_with repeat translate format quote_ident
    quote_literal quote_nullable md5 sha224 sha256 sha384 sha512 encode decode to_hex ascii
    chr regexp_replace regexp_match regexp_matches regexp_like regexp_count regexp_instr
    regexp_substr regexp_split_to_array regexp_split_to_table string_to_array
    string_to_table array_to_string overlay to_ascii unistr normalize
    coalesce nullif
    now current_date current_time current_timestamp localtime localtimestamp date_trunc
    date_part extract age to_char to_date to_timestamp to_number make_date make_time
    make_timestamp make_timestamptz make_interval date_bin justify_days justify_hours
    justify_interval clock_timestamp statement_timestamp transaction_timestamp isfinite
    timezone date text int4 int8 int2 float4 float8 numeric bool
    json_build_object jsonb_build_object json_build_array jsonb_build_array to_json to_jsonb
    json_object jsonb_object json_extract_path json_extract_path_text jsonb_extract_path
    jsonb_extract_path_text json_array_length jsonb_array_length json_typeof jsonb_typeof
    json_array_elements jsonb_array_elements json_array_elements_text
    jsonb_array_elements_text json_each jsonb_each json_each_text jsonb_each_text
    json_object_keys jsonb_object_keys jsonb_pretty jsonb_set jsonb_insert jsonb_strip_nulls
    json_strip_nulls row_to_json array_to_json jsonb_path_query jsonb_path_exists
    jsonb_path_match jsonb_path_query_first jsonb_path_query_array
    array_length cardinality unnest array_position array_positions array_remove
    array_replace array_append array_prepend array_cat array_upper array_lower array_dims
    array_ndims array_fill
    json_to_record json_to_recordset jsonb_to_record jsonb_to_recordset json_populate_record
    json_populate_recordset jsonb_populate_record jsonb_populate_recordset
    to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank
    ts_rank_cd ts_headline setweight
    generate_series gen_random_uuid
    row all any some
    """.split()
)

#: sqlglot's typed nodes for the functions and operators above. Resolved by name so that a
#: node missing from another sqlglot version is skipped rather than breaking the import.
_SAFE_FUNCTION_NODE_NAMES = """
    Count Sum Avg Min Max ArrayAgg GroupConcat LogicalAnd LogicalOr BitwiseAndAgg BitwiseOrAgg
    BitwiseXorAgg Stddev StddevPop StddevSamp Variance VariancePop Corr CovarPop CovarSamp
    RegrSlope RegrIntercept RegrR2 RegrCount RegrAvgx RegrAvgy RegrSxx RegrSyy RegrSxy
    PercentileCont PercentileDisc Mode JSONArrayAgg JSONObjectAgg JSONBObjectAgg AnyValue
    RowNumber Rank DenseRank PercentRank CumeDist Ntile Lag Lead FirstValue LastValue NthValue
    Abs Ceil Floor Round Trunc Sign Sqrt Cbrt Pow Exp Ln Log Greatest Least Pi Degrees Radians
    Rand WidthBucket Sin Cos Tan Asin Acos Atan Atan2
    Lower Upper Initcap Length BitLength Substring Trim Pad Concat ConcatWs Replace Reverse
    Left Right StrPosition SplitPart StartsWith Repeat Translate Format MD5 SHA2Digest Encode
    Decode Hex Ascii Chr RegexpReplace StringToArray ArrayToString Overlay
    Coalesce Nullif Case If Cast TryCast Extract Collate Date
    CurrentTimestamp CurrentDate CurrentTime Localtime Localtimestamp TimestampTrunc TimeToStr
    StrToDate StrToTime UnixToTime ToNumber TimeFromParts TimestampFromParts MakeInterval
    DateBin JustifyDays JustifyHours JustifyInterval
    JSONExtract JSONExtractScalar JSONBExtract JSONBExtractScalar JSONBContains
    JSONBContainsTopKey JSONBContainsAnyTopKeys JSONBContainsAllTopKeys JSONArrayContains
    JSONBPathExists JSONBDeleteAtPath JSONStripNulls
    Array Struct ArraySize Unnest Explode ArrayPosition ArrayRemove ArrayAppend ArrayPrepend
    ArrayConcat ArrayContains ArrayContainedBy ArrayContainsAll ArrayOverlaps
    ExplodingGenerateSeries GenerateSeries Uuid
    Exists And Or Xor RegexpLike RegexpILike RegexpFullMatch MatchAgainst
""".split()

#: The typed nodes judged by type; a node whose written name the guard recorded is judged
#: by that name against SAFE_FUNCTIONS instead.
SAFE_FUNCTION_NODES: frozenset[type[exp.Expression]] = frozenset(
    getattr(exp, name) for name in _SAFE_FUNCTION_NODE_NAMES if hasattr(exp, name)
)

#: Built-in PostgreSQL types sqlglot does not know and reports as user-defined. Casting to a
#: real user-defined type can run code (a domain's CHECK calls functions), so other names
#: are refused.
BUILTIN_EXTRA_TYPES: frozenset[str] = frozenset(
    """
    cidr macaddr macaddr8 tsvector tsquery citext jsonpath pg_lsn txid_snapshot pg_snapshot
    bpchar varbit line lseg box path polygon circle int8range numrange tsrange tstzrange
    int4multirange int8multirange nummultirange datemultirange tsmultirange tstzmultirange
    oid name xid xid8 cid tid
    """.split()
)

#: Reserved words in SAFE_FUNCTIONS that are syntax, not functions, when unquoted.
_SYNTAX_CALL_WORDS = frozenset({"row", "all", "any", "some"})

#: Keywords sqlglot parses with a call syntax of their own (`CAST(x AS int)`, `EXTRACT(...)`).
_CALL_KEYWORDS = frozenset({"cast", "try_cast", "extract", "exists", "convert"})

#: The only schema a function call may be qualified with (PostgreSQL's built-ins live there).
_FUNCTION_SCHEMA = "pg_catalog"

_ANONYMOUS_FUNCTIONS = tuple(getattr(exp, n) for n in ("Anonymous", "AnonymousAggFunc") if hasattr(exp, n))

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
_OPERATION_NODES: dict[type[exp.Expression], str] = {
    getattr(exp, name): op for name, op in _OPERATION_NODE_NAMES.items() if hasattr(exp, name)
}

#: Operations refused even when writes are allowed: they end or reshape the transaction or
#: session the caller set up around the statement (a read-only transaction, a role, a timeout).
_SESSION_OPERATIONS = frozenset(
    {"BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "SET", "RESET", "DISCARD"}
)

_READ_QUERY_NODES: tuple[type[exp.Expression], ...] = (exp.Select, exp.SetOperation, exp.Values)

_OPEN_BRACKETS = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
_CLOSE_BRACKETS = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})

#: Key in `Expression.meta` under which the guard records a function's name as written.
SOURCE_NAME_META = "toolagent_source_name"

_PLAIN_NAME = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")

_LEADING_WORD = re.compile(r'\s*"?([A-Za-z_][A-Za-z0-9_$]*)')


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


def _is_case_variant_of_builtin(name: str) -> bool:
    return name not in SAFE_FUNCTIONS and fold_identifier(name, quoted=False) in SAFE_FUNCTIONS | _CALL_KEYWORDS


def _quoted_builtin_reason(name: str) -> str:
    return f'function "{name}" is not allowed (quoted function names are case-sensitive)'


def check_token_forms(tokens: Sequence[Token]) -> list[str]:
    """Reject spellings the parser normalizes away: quoted built-in names, `U&"..."` identifiers."""
    reasons: list[str] = []
    for name, paren in zip(tokens, tokens[1:]):
        # sqlglot maps "FLOOR"(x) to the same node as floor(x), but PostgreSQL looks for a
        # function literally named FLOOR — never the built-in, possibly something user-made.
        if (
            name.token_type == TokenType.IDENTIFIER
            and paren.token_type == TokenType.L_PAREN
            and _is_case_variant_of_builtin(name.text)
        ):
            reasons.append(_quoted_builtin_reason(name.text))
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


# --- helpers over the AST ------------------------------------------------------------------


def _unwrap(statement: exp.Expression) -> exp.Expression:
    while isinstance(statement, exp.Subquery) and isinstance(statement.this, exp.Expression):
        statement = statement.this
    return statement


def is_read_query(statement: exp.Expression) -> bool:
    """True for SELECT, set operations (UNION/INTERSECT/EXCEPT) and VALUES, also parenthesized."""
    return isinstance(_unwrap(statement), _READ_QUERY_NODES)


def _leading_word(text: str) -> str | None:
    match = _LEADING_WORD.match(text)
    return match.group(1) if match else None


def operation_of(node: exp.Expression) -> str | None:
    """The operation a node performs (`DELETE`, `CREATE`, `VACUUM`...), None for a plain expression."""
    if isinstance(node, exp.Command):
        return (_leading_word(str(node.this)) or "COMMAND").upper()
    op = _OPERATION_NODES.get(type(node))
    if op is not None:
        return op
    if isinstance(node, exp.Into):
        return "CREATE"  # SELECT ... INTO creates a table
    if isinstance(node, exp.When) and isinstance(node.args.get("then"), exp.Var):
        # MERGE ... WHEN MATCHED THEN DELETE keeps the action as a bare keyword.
        if (_leading_word(node.args["then"].name) or "").upper() == "DELETE":
            return "DELETE"
    if isinstance(node, exp.OnConflict) and "UPDATE" in str(node.args.get("action") or "").upper():
        return "UPDATE"  # INSERT ... ON CONFLICT DO UPDATE
    return None


def operations(statement: exp.Expression) -> Iterator[tuple[str, exp.Expression]]:
    """Every (operation, node) anywhere in the tree, the top-level statement included."""
    for node in statement.walk():
        op = operation_of(node)
        if op is not None:
            yield op, node


def statement_kind(statement: exp.Expression, dialect: str = "postgres") -> str:
    """The lower-case kind of a statement: `select`, `union`, `values`, `delete`, `vacuum`..."""
    inner = _unwrap(statement)
    if isinstance(inner, _READ_QUERY_NODES):
        return inner.key
    op = operation_of(inner)
    if op is not None:
        return op.lower()
    # sqlglot reads some commands it does not know (LISTEN x, CHECKPOINT) as bare expressions;
    # their first word is the command.
    word = _leading_word(inner.sql(dialect=dialect))
    return word.lower() if word else inner.key


def _identifier_name(node: exp.Expression | str | None) -> str | None:
    if isinstance(node, exp.Identifier):
        return fold_identifier(node.this, quoted=bool(node.args.get("quoted")))
    if isinstance(node, str):
        return fold_identifier(node, quoted=False)
    return None


def _table_name(table: exp.Table) -> TableName | None:
    """The folded name of a table reference, None for a table function (`generate_series(...)`)."""
    this = table.this
    if isinstance(this, exp.Identifier):
        return TableName(
            name=fold_identifier(this.this, quoted=bool(this.args.get("quoted"))),
            schema=_identifier_name(table.args.get("db")),
            catalog=_identifier_name(table.args.get("catalog")),
        )
    if this is None or isinstance(this, (exp.Func, exp.Subquery, exp.Query, exp.Lateral, exp.Unnest)):
        return None
    # Some shape we do not model (deeper dotted names): keep its text, so an allowlist refuses it.
    return TableName(name=this.sql(), schema="?")


def _cte_name(cte: exp.CTE) -> str | None:
    alias = cte.args.get("alias")
    return _identifier_name(alias.this) if isinstance(alias, exp.TableAlias) else None


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
            names = [n for n in (_cte_name(c) for c in ctes) if n is not None]
            in_main = visible | frozenset(names)
            seen = visible
            for cte in ctes:
                body_scope = in_main if with_.args.get("recursive") else seen
                if isinstance(cte.this, exp.Expression):
                    stack.append((cte.this, body_scope))
                name = _cte_name(cte)
                if name is not None:
                    seen = seen | {name}
            for key, value in node.args.items():
                if value is with_:
                    continue
                for child in value if isinstance(value, list) else [value]:
                    if isinstance(child, exp.Expression):
                        stack.append((child, in_main))
            continue
        if isinstance(node, exp.Table):
            name = _table_name(node)
            if name is not None and not (name.schema is None and name.catalog is None and name.name in visible):
                refs.append(name)
        for child in node.iter_expressions():
            stack.append((child, visible))
    return refs


def _lock_clause(lock: exp.Lock) -> str:
    update, key = bool(lock.args.get("update")), bool(lock.args.get("key"))
    if update:
        return "FOR NO KEY UPDATE" if key else "FOR UPDATE"
    return "FOR KEY SHARE" if key else "FOR SHARE"


def _written_name(node: exp.Func) -> str | None:
    """The folded function name as written in the SQL, when the guard recorded it (see guard.py)."""
    text = node.meta.get(SOURCE_NAME_META)
    if not isinstance(text, str):
        return None
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return fold_identifier(text, quoted=False) if _PLAIN_NAME.fullmatch(text) else None


def _function_name(node: exp.Func, dialect: str) -> str:
    if isinstance(node, _ANONYMOUS_FUNCTIONS):
        return _identifier_name(node.this) or str(node.this)
    written = _written_name(node)
    if written is not None:
        return written
    word = _leading_word(node.sql(dialect=dialect))
    return word.lower() if word else node.sql_name().lower()


def _function_allowed(node: exp.Func) -> bool:
    if isinstance(node, _ANONYMOUS_FUNCTIONS):
        name = _identifier_name(node.this)
        if name in _SYNTAX_CALL_WORDS and isinstance(node.this, exp.Identifier) and node.this.args.get("quoted"):
            return False  # "row"(...) is a call to a user function, ROW(...) is syntax
        return name in SAFE_FUNCTIONS
    # sqlglot maps names from every dialect onto one node (ifnull, nvl -> Coalesce); PostgreSQL
    # has only its own names, and any other one is a user-defined function. So judge the name
    # that was written when it is known, and the node type only for syntax (CAST, ::, ARRAY[]).
    written = _written_name(node)
    if written is not None:
        return written in SAFE_FUNCTIONS
    return type(node) in SAFE_FUNCTION_NODES


def _function_qualifier(node: exp.Func) -> str | None:
    """The schema a call is qualified with: `s.f(x)` in an expression, `FROM s.f(x)` as a table."""
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        qualifier = parent.this
        name = _identifier_name(qualifier)
        return name if name is not None else qualifier.sql()
    if isinstance(parent, exp.Table) and parent.this is node:
        parts = [_identifier_name(parent.args.get(key)) for key in ("catalog", "db")]
        written = [p for p in parts if p is not None]
        return ".".join(written) if written else None
    return None


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
        if node is statement or node is _unwrap(statement):
            continue
        if isinstance(node, exp.Into):
            reasons.append("SELECT INTO is not allowed in read-only mode (it creates a table)")
        elif op not in policy.denied_operations:
            reasons.append(f"{op} inside a query is not allowed in read-only mode")
    for lock in statement.find_all(exp.Lock):
        reasons.append(f"locking clause {_lock_clause(lock)} is not allowed in read-only mode")
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
    if not is_read_query(statement) and operation_of(_unwrap(statement)) is None:
        kind = statement_kind(statement, policy.dialect).upper()
        reasons.append(f"statement type {kind} is not recognised and is refused")
    for op, node in operations(statement):
        if op in policy.denied_operations:
            continue
        if isinstance(node, exp.Command):
            reasons.append(f"statement type {op} cannot be checked by the guard and is refused")
        elif op in _SESSION_OPERATIONS:
            reasons.append(f"statement type {op} is refused (transaction control and session settings are not allowed)")
    return reasons


def rule_copy_targets(statement: exp.Expression, policy: SqlPolicy) -> list[str]:
    """Refuse COPY to or from a program or a server-side file."""
    reasons: list[str] = []
    for copy in statement.find_all(exp.Copy):
        for target in copy.args.get("files") or []:
            word = _identifier_name(target) if isinstance(target, exp.Identifier) else None
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
        if not _function_allowed(node):
            name = _function_name(node, policy.dialect)
            written = node.meta.get(SOURCE_NAME_META)
            if isinstance(written, str) and written.startswith('"') and _is_case_variant_of_builtin(name):
                reasons.append(_quoted_builtin_reason(name))  # same text as check_token_forms gives
            else:
                reasons.append(f"function {name} is not allowed")
        qualifier = _function_qualifier(node)
        if qualifier is not None and qualifier != _FUNCTION_SCHEMA:
            name = name or _function_name(node, policy.dialect)
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
            if schema and fold_identifier(schema.strip('"'), quoted=schema.startswith('"')) != _FUNCTION_SCHEMA:
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
            return ["string literal with a backslash before a quote is ambiguous (it depends on standard_conforming_strings)"]
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
