"""Result bounds of the Supabase server: byte accounting, statement nesting and the wrapper."""

from __future__ import annotations

import json

import pytest

from toolagent.servers.supabase.limits import OVERSIZED_COLUMN, collect, statement_body, wrap_postgres


@pytest.mark.parametrize(
    ("sql", "body"),
    [
        ("select 1", "select 1"),
        ("select 1;", "select 1"),
        ("select 1 ;  -- done", "select 1 "),
        ("select ';' as s", "select ';' as s"),
        ("select 1 -- trailing comment", "select 1 -- trailing comment"),
    ],
)
def test_statement_body(sql: str, body: str) -> None:
    assert statement_body(sql) == body


def test_wrapped_statement_keeps_a_trailing_comment_inside() -> None:
    wrapped = wrap_postgres("select 1 -- c", 1, 10)
    assert "select 1 -- c\n)" in wrapped and OVERSIZED_COLUMN in wrapped


def test_collect_stops_at_the_byte_cap_and_counts_the_json_array() -> None:
    rows = iter([(i, "x" * 10) for i in range(1000)])
    result = collect(["id", "v"], rows, max_rows=1000, max_bytes=300, convert=lambda v: v)
    assert result.truncated and result.truncated_reason == "max_result_bytes"
    assert len(json.dumps(result.rows, separators=(",", ":"))) <= 300 < result.result_bytes
    assert next(rows)[0] == result.row_count + 1  # the iterator was not read past the first row left out


def test_collect_reports_values_left_out() -> None:
    result = collect(
        ["v"], iter([("a", 0), (None, 1)]), max_rows=10, max_bytes=1000, convert=lambda v: v, oversized_index=1
    )
    assert result.rows == [{"v": "a"}, {"v": None}]
    assert result.oversized_values == 1 and result.truncated and result.truncated_reason == "max_result_bytes"


def test_collect_row_cap() -> None:
    result = collect(["v"], iter([(i,) for i in range(10)]), max_rows=3, max_bytes=10_000, convert=lambda v: v)
    assert result.row_count == 3 and result.truncated_reason == "max_rows"
