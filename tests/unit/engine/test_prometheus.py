"""Prometheus exposition through prometheus_client: names, labels, escaping, histograms; parsed by
the reference parser."""

from __future__ import annotations

import math

import pytest
from prometheus_client import parser

from toolagent.engine.prometheus import (
    CONTENT_TYPE,
    Histogram,
    HttpMetrics,
    PromDenial,
    PromHttpFigures,
    PromSnapshot,
    PromToolFigures,
    PromUserFigures,
    render,
)

SNAPSHOT = PromSnapshot(
    tools=[
        PromToolFigures("file_read", "file", success=3, failed=1, durations_s=[0.004, 0.02, 0.3, 7.0]),
        PromToolFigures("shell_exec", "system", success=1, cancelled=2, durations_s=[400.0]),
    ],
    denials=[PromDenial("shell_exec", "level", 2), PromDenial("file_write", "api_key_scope", 1)],
    rate_limited={"http_request": 4},
    active=2,
    users=[PromUserFigures("alice", success=3, failed=1, denied=2), PromUserFigures('bo"b\\n\n', cancelled=1)],
    discovery={"demo/supabase-agent": 4},
    http=[
        PromHttpFigures("get", "/api/v1/tools", 200, 5, durations_s=[0.01, 0.02]),
        PromHttpFigures("POST", "/api/v1/tools/{name}/execute", 403, 1, durations_s=[0.001]),
    ],
)


def families() -> dict[str, object]:
    return {f.name: f for f in parser.text_string_to_metric_families(render(SNAPSHOT))}


def samples(name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for family in parser.text_string_to_metric_families(render(SNAPSHOT)):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_families_types_and_help() -> None:
    fams = families()
    kinds = {name: f.type for name, f in fams.items()}  # type: ignore[attr-defined]
    # the reference parser names a counter family without its `_total` suffix
    assert kinds == {
        "tool_execution": "counter",
        "tool_execution_duration_seconds": "histogram",
        "tool_permission_denied": "counter",
        "tool_rate_limited": "counter",
        "tool_executions_active": "gauge",
        "tool_user_executions": "counter",
        "tool_discovery_count": "gauge",
        "http_requests": "counter",
        "http_request_duration_seconds": "histogram",
    }
    assert all(f.documentation for f in fams.values())  # type: ignore[attr-defined]
    assert CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_execution_counters_by_tool_category_status() -> None:
    got = samples("tool_execution_total")
    assert got[(("category", "file"), ("status", "success"), ("tool", "file_read"))] == 3
    assert got[(("category", "file"), ("status", "failed"), ("tool", "file_read"))] == 1
    assert got[(("category", "system"), ("status", "cancelled"), ("tool", "shell_exec"))] == 2
    assert len(got) == 6


def test_duration_histogram_buckets_sum_and_count() -> None:
    buckets = {
        dict(k)["le"]: v
        for k, v in samples("tool_execution_duration_seconds_bucket").items()
        if dict(k)["tool"] == "file_read"
    }
    assert buckets["0.005"] == 1 and buckets["0.025"] == 2 and buckets["0.5"] == 3 and buckets["10.0"] == 4
    assert buckets["+Inf"] == 4
    assert list(buckets.values()) == sorted(buckets.values())
    assert samples("tool_execution_duration_seconds_count")[(("tool", "file_read"),)] == 4
    assert samples("tool_execution_duration_seconds_sum")[(("tool", "file_read"),)] == pytest.approx(7.324)
    shell = {
        dict(k)["le"]: v
        for k, v in samples("tool_execution_duration_seconds_bucket").items()
        if dict(k)["tool"] == "shell_exec"
    }
    assert shell["300.0"] == 0 and shell["+Inf"] == 1


def test_denials_rate_limits_active_users_discovery() -> None:
    assert samples("tool_permission_denied_total") == {
        (("reason", "level"), ("tool", "shell_exec")): 2,
        (("reason", "api_key_scope"), ("tool", "file_write")): 1,
    }
    assert samples("tool_rate_limited_total") == {(("tool", "http_request"),): 4}
    assert samples("tool_executions_active") == {(): 2}
    users = samples("tool_user_executions_total")
    assert users[(("status", "denied"), ("user", "alice"))] == 2
    assert users[(("status", "cancelled"), ("user", 'bo"b\\n\n'))] == 1  # escaped and parsed back
    assert samples("tool_discovery_count") == {(("agent_id", "demo/supabase-agent"),): 4}


def test_http_metrics() -> None:
    got = samples("http_requests_total")
    assert got[(("method", "GET"), ("route", "/api/v1/tools"), ("status", "200"))] == 5
    assert got[(("method", "POST"), ("route", "/api/v1/tools/{name}/execute"), ("status", "403"))] == 1
    assert samples("http_request_duration_seconds_count")[(("method", "GET"), ("route", "/api/v1/tools"))] == 2


def test_text_shape() -> None:
    text = render(SNAPSHOT)
    assert text.endswith("\n") and "\n\n" not in text
    assert "# TYPE tool_execution_total counter\n" in text
    assert "# HELP tool_execution_duration_seconds " in text
    assert 'tool_execution_duration_seconds_bucket{le="+Inf",tool="file_read"} 4.0\n' in text
    assert 'tool_user_executions_total{status="cancelled",user="bo\\"b\\\\n\\n"} 1.0\n' in text


def test_empty_snapshot_still_declares_every_family() -> None:
    text = render(PromSnapshot())
    assert text.count("# TYPE ") == 9
    assert "tool_executions_active 0.0\n" in text
    assert [f.name for f in parser.text_string_to_metric_families(text)]


def test_same_labels_are_summed_not_repeated() -> None:
    text = render(
        PromSnapshot(
            tools=[
                PromToolFigures("t", "c", success=1, durations_s=[1.0]),
                PromToolFigures("t", "c", success=2, durations_s=[2.0]),
            ]
        )
    )
    assert 'tool_execution_total{category="c",status="success",tool="t"} 3.0\n' in text
    assert 'tool_execution_duration_seconds_count{tool="t"} 2.0\n' in text
    list(parser.text_string_to_metric_families(text))


def test_prebucketed_histogram() -> None:
    h = Histogram((0.1, 1.0), (2, 5), 3.5, 6)
    text = render(PromSnapshot(tools=[PromToolFigures("t", histogram=h)]))
    assert 'tool_execution_duration_seconds_bucket{le="0.1",tool="t"} 2.0\n' in text
    assert 'tool_execution_duration_seconds_bucket{le="+Inf",tool="t"} 6.0\n' in text
    assert Histogram.from_values([0.05, 0.1, 0.5, 2.0], (0.1, 1.0)) == Histogram((0.1, 1.0), (2, 3), 2.65, 4)
    assert Histogram.empty((1.0,)).merged(Histogram((1.0,), (1,), 0.5, 2)) == Histogram((1.0,), (1,), 0.5, 2)


@pytest.mark.parametrize(
    ("buckets", "counts", "count"),
    [
        ((1.0, 0.5), (0, 0), 0),
        ((1.0,), (1, 2), 2),
        ((0.5, 1.0), (2, 1), 2),
        ((1.0,), (3,), 2),
        ((math.inf,), (0,), 0),
    ],
)
def test_invalid_histograms_are_refused(buckets: tuple[float, ...], counts: tuple[int, ...], count: int) -> None:
    with pytest.raises(ValueError):
        Histogram(buckets, counts, 0.0, count)


def test_live_http_series_are_real_counters_and_histograms() -> None:
    http = HttpMetrics(buckets_s=(0.1, 1.0))
    for seconds in (0.05, 0.5, 2.0):
        http.observe("get", "/api/runs/{run_id}", 200, seconds)
    http.observe("POST", "/api/tools/execute", 403, 0.01)
    text = render(PromSnapshot(), http=http)
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    assert (fams["http_requests"].type, fams["http_request_duration_seconds"].type) == ("counter", "histogram")
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples}
    route = (("method", "GET"), ("route", "/api/runs/{run_id}"))
    assert got[("http_requests_total", (*route, ("status", "200")))] == 3
    assert got[("http_request_duration_seconds_bucket", (("le", "0.1"), *route))] == 1
    assert got[("http_request_duration_seconds_bucket", (("le", "+Inf"), *route))] == 3
    assert got[("http_request_duration_seconds_sum", route)] == pytest.approx(2.55)
    # Only the nine families of the table: no `_created` timestamps, no family twice.
    assert text.count("# TYPE ") == 9 and "_created" not in text
