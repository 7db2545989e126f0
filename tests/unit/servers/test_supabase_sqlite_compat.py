"""PostgreSQL SQL on the embedded SQLite database: transpiling, date functions, the demo build."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolagent.errors import StoreError
from toolagent.servers.supabase.demo_data import ensure_sqlite_demo, seed_hash
from toolagent.servers.supabase.sqlite_backend import SqliteBackend
from toolagent.servers.supabase.sqlite_compat import iso_timestamp, register_functions, to_sqlite


def run(sql: str) -> object:
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    try:
        return conn.execute(to_sqlite(sql)).fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT '2026-03-15 10:20:30'::timestamptz - INTERVAL '30 days'", "2026-02-13 10:20:30"),
        ("SELECT '2026-03-15 10:20:30'::timestamptz + INTERVAL '2 weeks'", "2026-03-29 10:20:30"),
        ("SELECT '2026-03-15 10:20:30'::timestamptz + INTERVAL '1 year 2 months'", "2027-05-15 10:20:30"),
        ("SELECT date_trunc('month', '2026-03-15 10:20:30'::timestamptz)", "2026-03-01 00:00:00"),
        ("SELECT date_trunc('week', '2026-03-15 10:20:30'::timestamptz)", "2026-03-09 00:00:00"),
        ("SELECT date_trunc('quarter', '2026-05-15 10:20:30'::timestamptz)", "2026-04-01 00:00:00"),
        ("SELECT date_trunc('year', '2026-05-15 10:20:30'::timestamptz) + INTERVAL '1 year'", "2027-01-01 00:00:00"),
        ("SELECT EXTRACT(YEAR FROM '2026-05-15 10:20:30'::timestamptz)", 2026),
        ("SELECT date_part('dow', '2026-03-15 10:20:30'::timestamptz)", 0),
        ("SELECT EXTRACT(EPOCH FROM '2026-01-01 00:01:00'::timestamptz - '2026-01-01 00:00:00'::timestamptz)", 60.0),
        ("SELECT '2026-03-15 10:20:30'::timestamptz::date", "2026-03-15"),
        ("SELECT 'Refund Request' ILIKE '%refund%'", 1),
        ("SELECT ROUND(AVG(x)::numeric, 2) FROM (SELECT 1 AS x UNION ALL SELECT 2) t", 1.5),
        ("SELECT now() > '2020-01-01'", 1),
    ],
)
def test_postgres_constructs_run_on_sqlite(sql: str, expected: object) -> None:
    assert run(sql) == expected


def test_timestamps_are_rendered_like_postgres() -> None:
    assert iso_timestamp("2026-03-15 10:20:30") == "2026-03-15T10:20:30+00:00"
    assert iso_timestamp("2026-03-15") == "2026-03-15"
    assert iso_timestamp("plain text") == "plain text"


def test_demo_database_is_built_once_and_rebuilt_when_seeds_change(tmp_path: Path) -> None:
    seeds = Path(__file__).resolve().parents[3] / "seeds" / "demo_db"
    copy = tmp_path / "seeds"
    copy.mkdir()
    for f in seeds.iterdir():
        if f.suffix in (".sql", ".csv"):
            (copy / f.name).write_bytes(f.read_bytes())
    db = tmp_path / "cache" / "demo.sqlite"
    ensure_sqlite_demo(db, copy)
    first = db.stat().st_mtime_ns
    ensure_sqlite_demo(db, copy)
    assert db.stat().st_mtime_ns == first  # unchanged seeds: not rebuilt
    before = seed_hash(copy)
    with open(copy / "kpi_metrics.csv", "a", encoding="utf-8") as fh:
        fh.write("11,extra_metric,An extra metric,count,quality\n")
    assert seed_hash(copy) != before
    ensure_sqlite_demo(db, copy)
    assert SqliteBackend(db, 1000).execute("SELECT count(*) AS n FROM kpi_metrics", 10).rows == [{"n": 11}]
    assert [p.name for p in db.parent.iterdir()] == ["demo.sqlite"]  # no temporary files left


def test_embedded_connection_is_read_only(tmp_path: Path) -> None:
    db = ensure_sqlite_demo(tmp_path / "demo.sqlite")
    backend = SqliteBackend(db, 15_000)
    with pytest.raises(StoreError, match="readonly|read-only|attempt to write"):
        backend.execute(
            "INSERT INTO kpi_metrics (id, name, description, unit, category) VALUES (99, 'x', 'x', 'x', 'x')", 10
        )
    with pytest.raises(StoreError, match="no such table"):
        backend.execute("SELECT * FROM nothing_here", 10)


def test_embedded_statement_timeout(tmp_path: Path) -> None:
    db = ensure_sqlite_demo(tmp_path / "demo.sqlite")
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000000) SELECT count(*) FROM n"
    with pytest.raises(StoreError, match="statement timed out after 50 ms"):
        SqliteBackend(db, 50).execute(slow, 10)
