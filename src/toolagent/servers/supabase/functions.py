"""The two SQL functions the `supabase` backend calls over PostgREST's RPC endpoint, and their
installer (`toolagent supabase install-functions`).

* `toolagent_schema()` returns the tables get-schema describes: columns in order, primary and
  foreign keys and row counts, for the tables of schema `public` the caller may SELECT.
* `toolagent_exec_sql(query, max_rows, max_bytes)` runs one read-only statement and returns
  `{"columns": [...], "rows": [{"f1": ...}, ...], "oversized": n, "truncated": reason}`. The
  column names come as a list (order and duplicate names kept); each row is a record whose
  values are in column order, so nothing depends on JSON object keys being unique. At most
  `max_rows + 1` rows are read (the extra one says "truncated"), values larger than
  `max_bytes` come back null (counted in `oversized`), and reading stops once the rows pass
  `max_bytes`.

Both are `SECURITY INVOKER` (the caller's grants and row-level security apply), `STABLE` (so
PostgREST opens a READ ONLY transaction for them, and PL/pgSQL refuses writes in them), and set
the transaction read only themselves before running anything, which later statements cannot
undo ("transaction read-write mode must be set before any query"). EXECUTE is revoked from
PUBLIC and from every other grantee (Supabase's default privileges grant new functions in
`public` to `anon` and `authenticated`) and granted to the reader role only.

A statement timeout cannot be set from inside the function for the statement already running;
PostgREST (12.2 and later) applies a function's `SET statement_timeout` before the call, and a
role's setting (11.1 and later) for every request of that role, so the installer sets the former.

The version is kept in each function's comment; installing again replaces the functions and the
grants (idempotent), and refuses to replace a newer version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Version of the functions below; bump it when their SQL or signature changes.
FUNCTIONS_VERSION = 1
#: RPC name of the schema function.
SCHEMA_FUNCTION = "toolagent_schema"
#: RPC name of the statement function.
EXEC_FUNCTION = "toolagent_exec_sql"
#: Role the functions are granted to unless told otherwise: the one Supabase's service_role key acts as.
DEFAULT_READER_ROLE = "service_role"
#: The statement timeout installed on the functions unless told otherwise.
DEFAULT_FUNCTION_TIMEOUT_MS = 15_000
#: Tables with fewer estimated rows get an exact count (as the postgres backend does).
EXACT_COUNT_BELOW = 100_000
#: The command that installs them, named in errors.
INSTALL_COMMAND = "toolagent supabase install-functions --db-url URL"

_COMMENT = "toolagent supabase functions v{version}"
_VERSION_RE = re.compile(r"^toolagent supabase functions v(\d+)")
_SIGNATURES = {
    SCHEMA_FUNCTION: f"public.{SCHEMA_FUNCTION}()",
    EXEC_FUNCTION: f"public.{EXEC_FUNCTION}(text, integer, integer)",
}
_ROLE_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: Roles the functions are never granted to.
_REFUSED_ROLES = frozenset({"anon", "authenticated", "public"})

_SCHEMA_SQL = """
CREATE OR REPLACE FUNCTION public.toolagent_schema()
RETURNS json
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = public
SET statement_timeout = '{timeout_ms}ms'
AS $fn$
DECLARE
  t record;
  n bigint;
  items json[] := '{{}}';
BEGIN
  -- SET TRANSACTION READ ONLY, in the form a STABLE function may run.
  PERFORM pg_catalog.set_config('transaction_read_only', 'on', true);
  FOR t IN
    SELECT c.oid, c.relname, c.reltuples::bigint AS estimate
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace ns ON ns.oid = c.relnamespace
    WHERE ns.nspname = 'public' AND c.relkind IN ('r', 'p')
      AND pg_catalog.has_table_privilege(c.oid, 'SELECT')
    ORDER BY c.relname
  LOOP
    n := t.estimate;
    IF n < {exact_below} THEN  -- -1 before the first ANALYZE
      EXECUTE format('SELECT count(*) FROM public.%I', t.relname) INTO n;
    END IF;
    items := items || json_build_object(
      'name', t.relname,
      'columns', (
        SELECT coalesce(json_agg(json_build_object(
                 'name', a.attname,
                 'type', pg_catalog.format_type(a.atttypid, a.atttypmod),
                 'nullable', NOT a.attnotnull) ORDER BY a.attnum), '[]')
        FROM pg_catalog.pg_attribute a
        WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped),
      'primary_key', (
        SELECT coalesce(json_agg(a.attname ORDER BY k.i), '[]')
        FROM pg_catalog.pg_constraint con,
             unnest(con.conkey) WITH ORDINALITY AS k(attnum, i)
             JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
        WHERE con.conrelid = t.oid AND con.contype = 'p'),
      'foreign_keys', (
        SELECT coalesce(json_agg(json_build_object(
                 'column', x.col, 'references_table', ref.relname, 'references_column', x.refcol)
                 ORDER BY con.conname, x.i), '[]')
        FROM pg_catalog.pg_constraint con
             JOIN pg_catalog.pg_class ref ON ref.oid = con.confrelid,
             LATERAL (
               SELECT k.i, a.attname AS col, b.attname AS refcol
               FROM unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, refnum, i)
                    JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
                    JOIN pg_catalog.pg_attribute b ON b.attrelid = con.confrelid AND b.attnum = k.refnum
             ) AS x
        WHERE con.conrelid = t.oid AND con.contype = 'f'),
      'row_count', n);
  END LOOP;
  RETURN array_to_json(items);
END
$fn$;
"""

_EXEC_SQL = """
CREATE OR REPLACE FUNCTION public.toolagent_exec_sql(query text, max_rows integer, max_bytes integer)
RETURNS json
LANGUAGE plpgsql STABLE SECURITY INVOKER
SET search_path = public
SET statement_timeout = '{timeout_ms}ms'
AS $fn$
DECLARE
  described json;
  names json;
  width integer;
  cols text[];
  types text[];
  exprs text[] := '{{}}';
  counts text[] := '{{}}';
  value text;
  wrapped text;
  r record;
  rows_text text := '';
  total bigint := 2;
  kept integer := 0;
  oversized bigint := 0;
  stopped text;
BEGIN
  -- Before anything runs: from here on nothing in this transaction can write, and nothing
  -- can switch it back ("transaction read-write mode must be set before any query"). This is
  -- SET TRANSACTION READ ONLY in the form a STABLE function may run.
  PERFORM pg_catalog.set_config('transaction_read_only', 'on', true);
  PERFORM pg_catalog.set_config('TimeZone', 'UTC', true);
  IF max_rows IS NULL OR max_rows < 1 OR max_bytes IS NULL OR max_bytes < 1 THEN
    RAISE EXCEPTION 'max_rows and max_bytes must be positive' USING ERRCODE = '22023';
  END IF;
  -- On lines of its own, so a trailing `-- comment` ends before the text nesting it.
  query := chr(10) || query || chr(10);
  -- The statement is only ever nested as a subquery: anything but one query is a syntax error.
  -- LIMIT 0 behind a LEFT JOIN plans it and names its columns (duplicates kept) without running it.
  EXECUTE format(
    'SELECT pg_catalog.row_to_json(_t) FROM (SELECT _q.* FROM (SELECT 1) _one '
    'LEFT JOIN LATERAL (SELECT * FROM (%s) _q0 LIMIT 0) _q ON true) _t', query) INTO described;
  SELECT coalesce(json_agg(e.key ORDER BY e.i), '[]'), count(*)
    INTO names, width FROM json_each(described) WITH ORDINALITY AS e(key, value, i);
  IF width = 0 THEN
    RETURN json_build_object('columns', names, 'rows', '[]'::json, 'oversized', 0, 'truncated', NULL);
  END IF;
  -- Columns renamed positionally (c1..cN), so odd or duplicate names do not matter.
  cols := ARRAY(SELECT format('c%s', i) FROM generate_series(1, width) AS i);
  EXECUTE format(
    'SELECT ARRAY[%s] FROM (SELECT 1) _one LEFT JOIN LATERAL (SELECT * FROM (%s) _q0 LIMIT 0) AS _q(%s) ON true',
    (SELECT string_agg(format('pg_catalog.pg_typeof(_q.%s)::text', c), ', ') FROM unnest(cols) AS c),
    query, array_to_string(cols, ', ')) INTO types;
  FOR i IN 1..width LOOP
    -- As the other backends return them: intervals in seconds, binary data in base64.
    value := CASE types[i]
      WHEN 'interval' THEN format('extract(epoch FROM _q.%s)', cols[i])
      WHEN 'bytea' THEN format('translate(encode(_q.%s, %L), chr(10), %L)', cols[i], 'base64', '')
      ELSE format('_q.%s', cols[i]) END;
    -- A value larger than max_bytes is left out (null) and counted instead of being sent.
    exprs := exprs || format('CASE WHEN pg_catalog.pg_column_size(_q.%s) > %s THEN NULL ELSE %s END',
                             cols[i], max_bytes, value);
    counts := counts || format('(coalesce(pg_catalog.pg_column_size(_q.%s), 0) > %s)::int', cols[i], max_bytes);
  END LOOP;
  wrapped := format('SELECT pg_catalog.row_to_json(ROW(%s))::text AS r, %s AS n FROM (%s) AS _q(%s) LIMIT %s',
                    array_to_string(exprs, ', '), array_to_string(counts, ' + '), query,
                    array_to_string(cols, ', '), max_rows + 1);
  FOR r IN EXECUTE wrapped LOOP
    IF kept >= max_rows THEN
      stopped := 'max_rows';
      EXIT;
    END IF;
    IF total + octet_length(r.r) + 1 > max_bytes THEN
      stopped := 'max_result_bytes';
      EXIT;
    END IF;
    rows_text := rows_text || CASE WHEN kept > 0 THEN ',' ELSE '' END || r.r;
    total := total + octet_length(r.r) + 1;
    kept := kept + 1;
    oversized := oversized + r.n;
  END LOOP;
  RETURN format('{{"columns":%s,"rows":[%s],"oversized":%s,"truncated":%s}}',
                names, rows_text, oversized, coalesce(to_json(stopped)::text, 'null'))::json;
END
$fn$;
"""


@dataclass(frozen=True)
class InstallResult:
    """What `install_functions` did."""

    previous_version: int | None
    """The version found before (None: not installed)."""
    version: int
    """The version now installed."""
    reader_role: str
    """The role the functions are granted to."""
    created_role: bool
    """True when the reader role did not exist and was created (NOLOGIN)."""


def check_role(role: str) -> str:
    """`role` if it may be the reader role.

    Raises:
        ValueError: not a plain lower-case identifier, or a role every key holder (anon, PUBLIC)
            or every signed-in user (authenticated) acts as.
    """
    if not _ROLE_RE.match(role):
        raise ValueError(f"reader role {role!r} is not a plain lower-case identifier (letters, digits, _)")
    if role in _REFUSED_ROLES:
        raise ValueError(
            f"reader role {role!r} would let anyone with the project's public key (or any signed-in user) run SQL: "
            "use service_role or a dedicated role"
        )
    return role


def functions_sql(
    reader_role: str = DEFAULT_READER_ROLE, statement_timeout_ms: int = DEFAULT_FUNCTION_TIMEOUT_MS
) -> str:
    """The whole installation as one SQL script, for the Supabase SQL editor (`--print`).

    The same statements `install_functions` runs, except that it creates the reader role only
    when missing and revokes exactly the grantees it finds; the script revokes from the
    Supabase roles by name.
    """
    role = check_role(reader_role)
    timeout = int(statement_timeout_ms)
    revoke_from = [r for r in ("anon", "authenticated", "service_role") if r != role]
    lines = [
        f"-- toolagent supabase functions v{FUNCTIONS_VERSION}: read-only SQL over PostgREST RPC.",
        "-- Safe to run again: it replaces the functions and their grants.",
        "BEGIN;",
        "DO $do$ BEGIN",
        f"  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{role}') THEN",
        f"    CREATE ROLE {role} NOLOGIN;",
        "  END IF;",
        "  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'authenticator') THEN",
        f"    GRANT {role} TO authenticator;",
        "  END IF;",
        "END $do$;",
        f"GRANT USAGE ON SCHEMA public TO {role};",
        _SCHEMA_SQL.format(timeout_ms=timeout, exact_below=EXACT_COUNT_BELOW).strip(),
        _EXEC_SQL.format(timeout_ms=timeout).strip(),
    ]
    for signature in _SIGNATURES.values():
        lines.append(f"COMMENT ON FUNCTION {signature} IS '{_COMMENT.format(version=FUNCTIONS_VERSION)}';")
        lines.append(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC;")
        lines.append("DO $do$ BEGIN")
        for other in revoke_from:
            lines.append(f"  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = '{other}') THEN")
            lines.append(f"    REVOKE ALL ON FUNCTION {signature} FROM {other};")
            lines.append("  END IF;")
        lines.append("END $do$;")
        lines.append(f"GRANT EXECUTE ON FUNCTION {signature} TO {role};")
    lines += ["NOTIFY pgrst, 'reload schema';", "COMMIT;"]
    return "\n".join(lines) + "\n"


def installed_version(conn: object) -> int | None:
    """The version of the installed functions (the lower of the two), None when either is missing."""
    versions: list[int] = []
    for signature in _SIGNATURES.values():
        row = conn.execute(  # type: ignore[attr-defined]
            "SELECT pg_catalog.obj_description(pg_catalog.to_regprocedure(%s), 'pg_proc')", [signature]
        ).fetchone()
        match = _VERSION_RE.match(row[0] or "") if row else None
        if match is None:
            return None
        versions.append(int(match.group(1)))
    return min(versions)


def install_functions(
    db_url: str,
    *,
    reader_role: str = DEFAULT_READER_ROLE,
    statement_timeout_ms: int = DEFAULT_FUNCTION_TIMEOUT_MS,
) -> InstallResult:
    """Create or update the functions in one transaction, granted to `reader_role` only.

    Args:
        db_url: a PostgreSQL URL of a role that may create functions in `public` (on Supabase:
            the `postgres` user's connection string).
        reader_role: the role the key's JWT carries (`service_role` for the service_role key).
        statement_timeout_ms: the `SET statement_timeout` of both functions.

    Raises:
        StoreError: the database refused (the message is PostgreSQL's), or a newer version is installed.
        ValueError: `reader_role` is not a plain identifier.
    """
    import psycopg
    from psycopg import sql

    from ...errors import StoreError
    from .settings import plain_postgres_url

    role = check_role(reader_role)
    timeout = int(statement_timeout_ms)
    try:
        with psycopg.connect(plain_postgres_url(db_url), connect_timeout=10) as conn:
            previous = installed_version(conn)
            if previous is not None and previous > FUNCTIONS_VERSION:
                raise StoreError(
                    f"the installed functions are version {previous}, newer than this toolagent's "
                    f"{FUNCTIONS_VERSION}: upgrade toolagent instead"
                )
            ident = sql.Identifier(role)
            created = conn.execute("SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)", [role]).fetchone()
            created_role = bool(created and created[0])
            if created_role:
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(ident))
            if conn.execute("SELECT FROM pg_roles WHERE rolname = 'authenticator'").fetchone() is not None:
                conn.execute(sql.SQL("GRANT {} TO authenticator").format(ident))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident))
            conn.execute(_SCHEMA_SQL.format(timeout_ms=timeout, exact_below=EXACT_COUNT_BELOW).encode())
            conn.execute(_EXEC_SQL.format(timeout_ms=timeout).encode())
            for signature in _SIGNATURES.values():
                target = sql.SQL(signature)
                comment = sql.Literal(_COMMENT.format(version=FUNCTIONS_VERSION))
                conn.execute(sql.SQL("COMMENT ON FUNCTION {} IS {}").format(target, comment))
                conn.execute(sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(target))
                # Whoever else holds EXECUTE (Supabase's default privileges give new functions in
                # public to anon and authenticated) loses it; the owner keeps its implicit right.
                grantees = conn.execute(
                    "SELECT DISTINCT r.rolname FROM pg_proc p, aclexplode(p.proacl) a "
                    "JOIN pg_roles r ON r.oid = a.grantee "
                    "WHERE p.oid = to_regprocedure(%s) AND a.grantee <> p.proowner AND r.rolname <> %s",
                    [signature, role],
                ).fetchall()
                for (grantee,) in grantees:
                    conn.execute(sql.SQL("REVOKE ALL ON FUNCTION {} FROM {}").format(target, sql.Identifier(grantee)))
                conn.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(target, ident))
            # PostgREST caches the functions it can call; this makes it look again.
            conn.execute("NOTIFY pgrst, 'reload schema'")
    except psycopg.Error as exc:
        diag = getattr(exc, "diag", None)
        message = getattr(diag, "message_primary", None) or str(exc).strip().splitlines()[0]
        raise StoreError(f"installing the Supabase functions failed: {message}") from exc
    return InstallResult(previous, FUNCTIONS_VERSION, role, created_role)


__all__ = [
    "DEFAULT_FUNCTION_TIMEOUT_MS",
    "DEFAULT_READER_ROLE",
    "EXEC_FUNCTION",
    "FUNCTIONS_VERSION",
    "INSTALL_COMMAND",
    "SCHEMA_FUNCTION",
    "InstallResult",
    "check_role",
    "functions_sql",
    "install_functions",
    "installed_version",
]
