"""analyze-results statistics on small known tables, and the summary text."""

from __future__ import annotations

import math
import statistics
from typing import Any

import pytest

from toolagent.servers.supabase.analysis import analyze, normalize_rows
from toolagent.servers.supabase.models import AnalysisResult

ROWS = [
    {"team": "a", "score": 10, "when": "2026-01-01T00:00:00+00:00", "id": 1},
    {"team": "b", "score": 20, "when": "2026-01-11T00:00:00+00:00", "id": 2},
    {"team": "a", "score": 30, "when": "2026-01-06T12:00:00+00:00", "id": 3},
    {"team": "c", "score": None, "when": None, "id": 4},
]


def stats_by_name(result: AnalysisResult) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in result.stats.model_dump()["columns"]}


def test_numeric_text_and_date_statistics_are_exact() -> None:
    result = analyze(ROWS)
    assert result.stats.row_count == 4
    s = stats_by_name(result)
    score = s["score"]
    assert score["kind"] == "numeric"
    assert (score["count"], score["nulls"], score["distinct"]) == (3, 1, 3)
    assert (score["min"], score["max"], score["mean"], score["median"], score["sum"]) == (10.0, 30.0, 20.0, 20.0, 60.0)
    assert score["stddev"] == round(math.sqrt(200 / 3), 6)
    assert score["outliers"] == []
    team = s["team"]
    assert team["kind"] == "text" and team["distinct"] == 3
    assert team["top_values"] == [{"value": "a", "count": 2}, {"value": "b", "count": 1}, {"value": "c", "count": 1}]
    when = s["when"]
    assert when["kind"] == "datetime" and when["nulls"] == 1
    assert when["earliest"] == "2026-01-01T00:00:00+00:00"
    assert when["latest"] == "2026-01-11T00:00:00+00:00"
    assert when["span_days"] == 10.0
    assert s["id"]["kind"] == "numeric" and s["id"]["outliers"] == []


def test_outliers_by_z_score_and_interquartile_range() -> None:
    values = [1, 2, 2, 3, 2, 1, 3, 2, 100]
    result = analyze([{"latency": v} for v in values])
    latency = stats_by_name(result)["latency"]
    z = (100 - statistics.fmean(values)) / statistics.pstdev(values)
    assert latency["outliers"] == [{"row": 8, "value": 100.0, "z_score": round(z, 3)}]
    assert "Outlier in latency: 100 in row 9" in result.summary


def test_z_score_outliers_in_a_larger_sample() -> None:
    values = [10.0] * 30 + [11.0] * 30 + [40.0]
    latency = stats_by_name(analyze([[v] for v in values], ["latency"]))["latency"]
    assert [o["row"] for o in latency["outliers"]] == [60]
    assert latency["outliers"][0]["z_score"] > 3


def test_rows_as_arrays_and_booleans() -> None:
    result = analyze([["x", True], ["y", False], ["z", True]], ["name", "ok"])
    s = stats_by_name(result)
    assert s["ok"]["kind"] == "boolean"
    assert s["ok"]["top_values"] == [{"value": "true", "count": 2}, {"value": "false", "count": 1}]
    assert s["name"]["distinct"] == 3


def test_normalize_rows_shapes() -> None:
    assert normalize_rows([{"a": 1}, {"b": 2}], None) == (["a", "b"], [[1, None], [None, 2]])
    assert normalize_rows([[1, 2], [3]], None) == (["column_1", "column_2"], [[1, 2], [3, None]])
    assert normalize_rows([5, 6], None) == (["value"], [[5], [6]])
    assert normalize_rows([{"a": 1, "b": 2}], ["b"]) == (["b"], [[2]])


def test_summary_mentions_audience_row_count_and_highlights() -> None:
    rows = [{"agent": "support-bot", "count": 812}, {"agent": "sales", "count": 188}]
    summary = analyze(rows, prompt="Summarize main findings for stakeholders").summary
    assert summary.startswith("## Summary for stakeholders")
    assert "**2 rows**" in summary
    assert "Highest count: support-bot with 812, 81% of the total." in summary
    assert "Lowest count: sales with 188." in summary
    plain = analyze(rows).summary
    assert plain.startswith("## Summary\n") and "stakeholders" not in plain


def test_truncation_and_empty_results_are_said() -> None:
    assert "truncated" in analyze([{"x": 1}], truncated=True).summary
    empty = analyze([])
    assert empty.stats.row_count == 0 and "no rows" in empty.summary


@pytest.mark.parametrize("value", [{"k": 1}, [1, 2]])
def test_nested_values_count_as_text(value: object) -> None:
    s = stats_by_name(analyze([{"v": value}, {"v": value}]))
    assert s["v"]["kind"] == "text" and s["v"]["top_values"][0]["count"] == 2


def test_same_rows_same_result() -> None:
    assert analyze(ROWS, prompt="for stakeholders") == analyze(ROWS, prompt="for stakeholders")
