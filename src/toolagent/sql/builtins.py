"""What the guard knows of PostgreSQL's built-ins: the functions and types that only compute a
value, and how a call's name is read (as written, not as sqlglot normalizes it).

sqlglot turns the functions it knows into typed nodes (`exp.Count`, `exp.TimestampTrunc`, ...)
and everything else into `exp.Anonymous`, so both forms have their own allowlist here.
"""

from __future__ import annotations

import re

from sqlglot import exp

from .names import fold_identifier
from .tree import identifier_name, leading_word

#: PostgreSQL built-in functions that only compute a value from their arguments: no I/O,
#: no waiting, no settings, no access to other tables or sessions. Names are folded
#: (lower-case). Anything else — pg_sleep, pg_read_file, lo_*, dblink*, set_config,
#: current_setting, query_to_xml, nextval, user-defined functions — is refused. `row`, `all`,
#: `any` and `some` are reserved words that sqlglot sometimes reads as calls (`ROW(1, 2)`,
#: `x = ALL(ARRAY[...])`); only their quoted forms could name a user function, and those
#: are refused (see `SYNTAX_CALL_WORDS`).
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
SAFE_FUNCTION_NODES: frozenset[type[exp.Expr]] = frozenset(
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
SYNTAX_CALL_WORDS = frozenset({"row", "all", "any", "some"})

#: Keywords sqlglot parses with a call syntax of their own (`CAST(x AS int)`, `EXTRACT(...)`).
CALL_KEYWORDS = frozenset({"cast", "try_cast", "extract", "exists", "convert"})

#: The only schema a function call may be qualified with (PostgreSQL's built-ins live there).
FUNCTION_SCHEMA = "pg_catalog"

ANONYMOUS_FUNCTIONS = tuple(getattr(exp, n) for n in ("Anonymous", "AnonymousAggFunc") if hasattr(exp, n))


#: Key in `Expression.meta` under which the guard records a function's name as written.
SOURCE_NAME_META = "toolagent_source_name"

PLAIN_NAME = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")


def is_case_variant_of_builtin(name: str) -> bool:
    return name not in SAFE_FUNCTIONS and fold_identifier(name, quoted=False) in SAFE_FUNCTIONS | CALL_KEYWORDS


def quoted_builtin_reason(name: str) -> str:
    return f'function "{name}" is not allowed (quoted function names are case-sensitive)'


def written_name(node: exp.Func) -> str | None:
    """The folded function name as written in the SQL, when the guard recorded it (see guard.py)."""
    text = node.meta.get(SOURCE_NAME_META)
    if not isinstance(text, str):
        return None
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1].replace('""', '"')
    return fold_identifier(text, quoted=False) if PLAIN_NAME.fullmatch(text) else None


def function_name(node: exp.Func, dialect: str) -> str:
    if isinstance(node, ANONYMOUS_FUNCTIONS):
        return identifier_name(node.this) or str(node.this)
    written = written_name(node)
    if written is not None:
        return written
    word = leading_word(node.sql(dialect=dialect))
    return word.lower() if word else node.sql_name().lower()


def function_allowed(node: exp.Func) -> bool:
    if isinstance(node, ANONYMOUS_FUNCTIONS):
        name = identifier_name(node.this)
        if name in SYNTAX_CALL_WORDS and isinstance(node.this, exp.Identifier) and node.this.args.get("quoted"):
            return False  # "row"(...) is a call to a user function, ROW(...) is syntax
        return name in SAFE_FUNCTIONS
    # sqlglot maps names from every dialect onto one node (ifnull, nvl -> Coalesce); PostgreSQL
    # has only its own names, and any other one is a user-defined function. So judge the name
    # that was written when it is known, and the node type only for syntax (CAST, ::, ARRAY[]).
    written = written_name(node)
    if written is not None:
        return written in SAFE_FUNCTIONS
    return type(node) in SAFE_FUNCTION_NODES


def function_qualifier(node: exp.Func) -> str | None:
    """The schema a call is qualified with: `s.f(x)` in an expression, `FROM s.f(x)` as a table."""
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        qualifier = parent.this
        name = identifier_name(qualifier)
        return name if name is not None else qualifier.sql()
    if isinstance(parent, exp.Table) and parent.this is node:
        parts = [identifier_name(parent.args.get(key)) for key in ("catalog", "db")]
        written = [p for p in parts if p is not None]
        return ".".join(written) if written else None
    return None
