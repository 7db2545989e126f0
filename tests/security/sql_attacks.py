"""SQL the guard must refuse, as data: one line per attack, `(sql, words the refusal contains)`.

The policy is the Supabase server's default: the demo tables only, read-only. Add a line to
add an attack; `test_sql_attacks.py` parametrizes over these tables.
"""

from __future__ import annotations

#: The tables the attacks run against (the Supabase server's default allowlist).
DEMO_TABLES = ("users", "agent_conversations", "kpi_metrics", "kpi_data")

#: PostgreSQL attribute notation: `(x).f` and `a.f` / `a.b.f` call `f(x)`.
ATTRIBUTE_NOTATION: list[tuple[str, str]] = [
    ("select (1).pg_sleep", "attribute access"),
    ("select ('10').pg_sleep from users limit 1", "attribute access"),
    ("select ('/etc/passwd').pg_read_file", "attribute access"),
    ("select ('.').pg_ls_dir", "attribute access"),
    ("select (pg_backend_pid()).pg_terminate_backend", "attribute access"),
    ("select (123).pg_terminate_backend from users limit 1", "attribute access"),
    ("select ('toolagent_probe_slot').pg_create_physical_replication_slot", "attribute access"),
    ("select ('select usename, passwd from pg_shadow').ts_stat", "attribute access"),
    ("select ((('x'))).pg_read_file", "attribute access"),
    ("select ('x'::text).pg_read_file", "attribute access"),
    ("select (now()::text).pg_read_file", "attribute access"),
    ("select (lower('/ETC/PASSWD')).pg_read_file", "attribute access"),
    ("select (select email from users limit 1).pg_read_file", "attribute access"),
    ("select (row('/etc/passwd')).pg_read_file", "attribute access"),
    ("select (row(1, 2)).f1", "attribute access"),
    ("select (u).email from users u limit 1", "attribute access"),
    ("select (u.*).email from users u limit 1", "attribute access"),
    ("select (u).* from users u limit 1", "attribute access"),
    ("select (u).row_to_json from users u limit 1", "attribute access"),
    ("select ('now').pg_sleep_until", "attribute access"),
    ("select email.pg_read_file from users limit 1", "not a table or alias"),
    ('select "email".pg_read_file from users limit 1', "not a table or alias"),
    ("select full_name.pg_sleep from users limit 1", "not a table or alias"),
    ("select u.email.pg_read_file from users u limit 1", "field selection"),
    ("select users.email.pg_read_file from users limit 1", "field selection"),
    ("select a.b.c.d from users limit 1", "four parts"),
    ("select a.b.c.d.e from users limit 1", "attribute access"),
    ("select * from users where email.pg_read_file is not null limit 1", "not a table or alias"),
    ("select count(*) from users group by email.pg_ls_dir", "not a table or alias"),
    ("select email from users order by email.pg_sleep limit 1", "not a table or alias"),
    ("select (select email.pg_read_file) from users limit 1", "not a table or alias"),
    ("with c as (select email.pg_read_file from users) select * from c limit 1", "not a table or alias"),
    (
        "with c as (select email.pg_read_file from users) select * from c, kpi_data email limit 1",
        "not a table or alias",
    ),
    ("select * from users u, lateral (select x.pg_read_file from kpi_data) s limit 1", "not a table or alias"),
    ("select 1 from users union select email.pg_sleep from users limit 1", "not a table or alias"),
]

#: Casts whose input function looks names up in the catalogs.
CATALOG_CASTS: list[tuple[str, str]] = [
    ("select 'pg_shadow'::regclass", "cast to regclass"),
    ("select 'pg_read_file'::regproc", "cast to regproc"),
    ("select 'pg_read_file(text)'::regprocedure", "cast to regprocedure"),
    ("select cast('pg_authid' as regclass)", "cast to regclass"),
    ("select 'postgres'::regrole", "cast to regrole"),
    ("select '+'::regoper", "cast to regoper"),
    ("select 'pg_catalog'::regnamespace", "cast to regnamespace"),
    ("select 'int4'::regtype", "cast to regtype"),
]

#: Other ways to reach functions, catalogs or other schemas without a visible call.
OTHER_CALLS: list[tuple[str, str]] = [
    ("table pg_shadow", "catalog table"),
    ("table pg_catalog.pg_authid", "catalog table"),
    ("select * from pg_sleep(10)", "function pg_sleep"),
    ("select * from pg_ls_dir('.')", "function pg_ls_dir"),
    ("select * from rows from (pg_ls_dir('.'))", "function pg_ls_dir"),
    ("select * from ts_stat('select 1')", "function ts_stat"),
    ("select * from users, lateral pg_read_file('/etc/passwd') f limit 1", "function pg_read_file"),
    ("select 1 operator(public.+) 1", "operator public.+"),
    ("select 1 from users where email operator(myschema.=) 'x' limit 1", "operator myschema.="),
    ("select '(1)'::users", "type users"),
    ("select email::myschema.mytype from users limit 1", "type"),
    ("select public.pg_sleep(1)", "only pg_catalog functions"),
    ("select pg_catalog.pg_sleep(1)", "function pg_sleep"),
    ("select usename, passwd from pg_shadow", "catalog table"),
    ("select * from information_schema.tables", "catalog table"),
    ("select * from pg_catalog.pg_roles", "catalog table"),
    ("select query_to_xml('select 1', true, true, '')", "function query_to_xml"),
    ("select current_setting('data_directory')", "function current_setting"),
    ("select set_config('statement_timeout', '0', false)", "function set_config"),
    ("select lo_import('/etc/passwd')", "function lo_import"),
    ("select dblink('host=x', 'select 1')", "function dblink"),
]

#: Statements that must keep working (the rules above must not catch ordinary SQL).
ALLOWED: list[str] = [
    "select u.email from users u limit 10",
    "select users.email from users limit 10",
    "select public.users.email from public.users limit 10",
    "select u.* from users u limit 10",
    "select c.status, count(*) from agent_conversations c group by c.status limit 10",
    "select u.email, c.title from users u join agent_conversations c on c.user_id = u.id limit 10",
    "select * from users u where exists (select 1 from agent_conversations c where c.user_id = u.id) limit 5",
    "with recent as (select * from agent_conversations) select r.title from recent r limit 5",
    "select g.g from generate_series(1, 3) g limit 3",
    "select m.name, avg(d.value) from kpi_data d join kpi_metrics m on m.id = d.metric_id group by m.name limit 10",
    "select pg_catalog.lower(email) from users limit 1",
    "select 1 << 4",
    "select email from users where email like 'a%' limit 1",
]

#: Catalog reads the Supabase server refuses by default, even with `SUPABASE_ALLOWED_TABLES=*`.
CATALOG_READS: list[str] = [
    "select usename, passwd from pg_shadow",
    "select rolname, rolpassword from pg_catalog.pg_authid",
    "select * from pg_roles",
    "select * from information_schema.tables",
    "select * from pg_stat_activity",
    "select name, sql from sqlite_master",
    "select name from sqlite_schema",
]

#: Statements that build huge values or endless rows without a table (or from small ones);
#: each must end at the statement timeout or the byte cap and leave the server answering.
RESOURCE_STATEMENTS: list[str] = [
    "select repeat('x', 1000000000) as v",
    "select lpad('x', 1000000000, 'y') as v",
    "select array_fill(1, array[100000000]) as v",
    "select g from generate_series(1, 1000000000000) g",
    "with recursive r(n) as (select 1 union all select n + 1 from r) select count(*) from r",
    "with recursive r(n) as (select 1 union all select n + 1 from r) select n from r",
    "select string_agg(a.email || b.email, ',') from users a, users b",
    "select string_agg(a.email || b.email || c.email, ',') from users a, users b, users c",
    "select * from agent_conversations a, agent_conversations b",
]
