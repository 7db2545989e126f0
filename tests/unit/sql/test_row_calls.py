"""Functional notation on a row: `t.f` where the FROM item `t` has no column `f` is PostgreSQL's
call `f(t)`. Where the item's columns are known (the policy's `table_columns`, or a CTE's or
subquery's select list), the guard judges such a name as that call; one row per statement. The
last test shows PostgreSQL really making the call, with the columns read from its catalog."""

from __future__ import annotations

import pytest

from toolagent.sql import SqlGuard, SqlPolicy

COLUMNS = {"users": ["id", "email", "full_name"], "kpi_data": ["id", "value"]}
GUARD = SqlGuard(SqlPolicy.from_security(None, ["users", "kpi_data", "kpi_metrics"], table_columns=COLUMNS))

CASES: list[tuple[str, str | None]] = [
    # the call of an allowed function, or a real column: allowed
    ("select u.row_to_json from users u limit 1", None),
    ("select u.to_jsonb from users u limit 1", None),
    ('select u."row_to_json" from users u limit 1', None),
    ("select u.email from users u limit 1", None),
    ("select users.full_name from users limit 1", None),
    ("select public.users.email from public.users limit 1", None),
    ("select u.* from users u limit 1", None),
    ("with c as (select email, id as n from users) select c.email, c.n from c limit 1", None),
    ("select s.x from (select 1 as x) s limit 1", None),
    # unknown columns (no catalog for kpi_metrics, a CTE selecting *): taken for a column
    ("select m.anything from kpi_metrics m limit 1", None),
    ("with c as (select * from users) select c.anything from c limit 1", None),
    # the call of any other function: refused
    ("select u.leak from users u limit 1", "PostgreSQL calls leak(u)"),
    ("select users.pg_sleep from users limit 1", "function pg_sleep is not allowed"),
    ("select public.users.leak from public.users limit 1", "calls leak(users)"),
    ('select u."Row_To_Json" from users u limit 1', "function Row_To_Json is not allowed"),
    ("select d.lo_export from kpi_data d limit 1", "function lo_export is not allowed"),
    ("select u.email from users u where u.leak is not null limit 1", "calls leak(u)"),
    ("select u.email from users u order by u.leak limit 1", "calls leak(u)"),
    ("with c as (select email from users) select c.leak from c limit 1", "calls leak(c)"),
    ("select s.lo_export from (select 1 as x) s limit 1", "calls lo_export(s)"),
    ("select (select u.leak) from users u limit 1", "calls leak(u)"),
    ("select u.row from users u limit 1", "function row is not allowed"),
]


@pytest.mark.parametrize(("sql", "needle"), CASES, ids=[c[0] for c in CASES])
def test_functional_notation_on_a_row(sql: str, needle: str | None) -> None:
    decision = GUARD.check(sql)
    if needle is None:
        assert decision.allowed, decision.reasons
    else:
        assert not decision.allowed and any(needle in r for r in decision.reasons), decision.reasons


def test_policies_with_columns_stay_hashable_and_equal() -> None:
    one = SqlPolicy(table_columns={"users": ["email", "id"]})
    two = SqlPolicy(table_columns={"users": ("id", "email")})
    assert one == two and hash(one) == hash(two)
    assert one.columns_of("users") == {"id", "email"} and one.columns_of("kpi_data") is None


def test_postgresql_makes_the_call_and_the_guard_refuses_it(pg_url: str) -> None:
    import psycopg

    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("create table users (id int, email text)")
        conn.execute("insert into users values (1, 'a@example.com')")
        conn.execute("create function leak(users) returns text language sql as $$ select 'called with ' || $1.email $$")
        assert conn.execute("select u.leak from users u").fetchone() == ("called with a@example.com",)
        rows = conn.execute(
            "select table_name, column_name from information_schema.columns where table_schema = 'public'"
        )
        columns: dict[str, list[str]] = {}
        for table, column in rows:
            columns.setdefault(table, []).append(column)
        guard = SqlGuard(SqlPolicy.from_security(None, ["users"], table_columns=columns))
        assert not guard.check("select u.leak from users u limit 1").allowed
        allowed = "select u.row_to_json from users u limit 1"
        assert guard.check(allowed).allowed
        assert conn.execute(allowed).fetchone() == ({"id": 1, "email": "a@example.com"},)
