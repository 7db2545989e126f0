"""Prometheus metrics of the engine's figures, exposed through `prometheus_client`.

The engine turns its metrics snapshot into a `PromSnapshot` (plain frozen records defined here);
`SnapshotCollector` presents it to a `prometheus_client` registry, and `render` writes the text
exposition (format 0.0.4) a scraper reads. The API's request counts and latencies are real
`prometheus_client` counters and histograms (`HttpMetrics`), observed as requests are served.

| metric | type | labels |
| --- | --- | --- |
| `tool_execution_total` | counter | tool, category, status (`success`, `failed`, `cancelled`) |
| `tool_execution_duration_seconds` | histogram | tool |
| `tool_permission_denied_total` | counter | tool, reason |
| `tool_rate_limited_total` | counter | tool |
| `tool_executions_active` | gauge | |
| `tool_user_executions_total` | counter | user, status (`success`, `failed`, `cancelled`, `denied`) |
| `tool_discovery_count` | gauge | agent_id |
| `toolagent_queue_jobs` | gauge | queue, status (procrastinate's: `todo`, `doing`, `succeeded`, ...; PostgreSQL) |
| `toolagent_workers` | gauge | (live workers: heartbeat within `TOOLAGENT_WORKER_STALLED_S`; PostgreSQL) |
| `http_requests_total` | counter | method, route, status |
| `http_request_duration_seconds` | histogram | method, route |

Counters must only grow between scrapes; a figure that can shrink (a bounded history) shows
up to Prometheus as a counter reset.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client import Histogram as PromHistogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from ..model.execution import DURATION_BUCKETS_S
from ..model.status import CallStatus, ExecutionStatus

#: The `Content-Type` of the rendered text.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
#: Upper bounds (seconds) of the duration histograms; `+Inf` is implied. The same bounds as the
#: store's per-tool duration buckets, so the histogram is read from them as counted.
DEFAULT_BUCKETS_S: tuple[float, ...] = DURATION_BUCKETS_S
#: `status` label values of `tool_execution_total`.
EXECUTION_STATUSES = (ExecutionStatus.SUCCESS, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)

_HTTP_TOTAL = ("http_requests_total", "HTTP requests served, by method, route and status.")
_HTTP_TIME = ("http_request_duration_seconds", "HTTP request time in seconds, by method and route.")


@dataclass(frozen=True)
class Histogram:
    """Cumulative bucket counts: `counts[i]` observations were `<= buckets[i]`; `count` includes `+Inf`."""

    buckets: tuple[float, ...]
    """Finite upper bounds, ascending."""
    counts: tuple[int, ...]
    """Cumulative counts, one per bound, never decreasing."""
    sum: float
    """Sum of all observations (seconds)."""
    count: int
    """Number of observations (the `+Inf` bucket)."""

    def __post_init__(self) -> None:
        if len(self.buckets) != len(self.counts):
            raise ValueError("a histogram needs one count per bucket bound")
        if list(self.buckets) != sorted(set(self.buckets)) or any(math.isinf(b) or math.isnan(b) for b in self.buckets):
            raise ValueError("histogram bounds must be finite and strictly ascending")
        if any(b < a for a, b in zip(self.counts, self.counts[1:], strict=False)) or (
            self.counts and self.counts[-1] > self.count
        ):
            raise ValueError("histogram counts must be cumulative and at most `count`")

    @classmethod
    def empty(cls, buckets: Sequence[float] = DEFAULT_BUCKETS_S) -> Histogram:
        """A histogram with no observations."""
        return cls(tuple(buckets), (0,) * len(buckets), 0.0, 0)

    @classmethod
    def from_values(cls, values_s: Iterable[float], buckets: Sequence[float] = DEFAULT_BUCKETS_S) -> Histogram:
        """Bucket raw observations (seconds)."""
        bounds = tuple(buckets)
        per = [0] * (len(bounds) + 1)
        total, n = 0.0, 0
        for v in values_s:
            per[bisect.bisect_left(bounds, v)] += 1
            total += v
            n += 1
        cumulative, running = [], 0
        for c in per[:-1]:
            running += c
            cumulative.append(running)
        return cls(bounds, tuple(cumulative), total, n)

    def merged(self, other: Histogram) -> Histogram:
        """Both histograms' observations together (same bounds)."""
        if self.buckets != other.buckets:
            raise ValueError("cannot merge histograms with different bounds")
        counts = tuple(a + b for a, b in zip(self.counts, other.counts, strict=True))
        return Histogram(self.buckets, counts, self.sum + other.sum, self.count + other.count)


@dataclass(frozen=True)
class PromToolFigures:
    """Per-tool execution counts and durations."""

    tool: str
    category: str = ""
    success: int = 0
    failed: int = 0
    cancelled: int = 0
    durations_s: Sequence[float] = ()
    """Raw durations (seconds); ignored when `histogram` is given."""
    histogram: Histogram | None = None
    """Pre-bucketed durations, for a collector that keeps buckets instead of raw values."""

    def duration_histogram(self, buckets: Sequence[float] = DEFAULT_BUCKETS_S) -> Histogram:
        """The durations as a histogram."""
        return self.histogram if self.histogram is not None else Histogram.from_values(self.durations_s, buckets)


@dataclass(frozen=True)
class PromDenial:
    """Permission denials of one tool for one reason (e.g. `level`, `api_key_scope`, `unknown_tool`)."""

    tool: str
    reason: str
    count: int


@dataclass(frozen=True)
class PromUserFigures:
    """Per-user execution counts."""

    user: str
    success: int = 0
    failed: int = 0
    cancelled: int = 0
    denied: int = 0


@dataclass(frozen=True)
class PromHttpFigures:
    """Requests to one route with one method and status."""

    method: str
    route: str
    status: int | str
    count: int
    durations_s: Sequence[float] = ()
    histogram: Histogram | None = None


@dataclass(frozen=True)
class PromSnapshot:
    """Everything `render` writes."""

    tools: Sequence[PromToolFigures] = ()
    denials: Sequence[PromDenial] = ()
    rate_limited: Mapping[str, int] = field(default_factory=dict)
    """Rate-limited calls per tool."""
    active: int = 0
    """Executions running now."""
    users: Sequence[PromUserFigures] = ()
    discovery: Mapping[str, int] = field(default_factory=dict)
    """Tools discoverable per agent id (`tool_discovery_count`)."""
    http: Sequence[PromHttpFigures] = ()
    buckets_s: Sequence[float] = DEFAULT_BUCKETS_S
    """Bounds used for raw durations."""
    queue: Mapping[tuple[str, str], int] | None = None
    """Jobs per (queue, status) of the workers' queue; None: no queue (SQLite)."""
    workers: int | None = None
    """Live workers; None: no queue (SQLite)."""


class HttpMetrics:
    """Request counts and latency histograms per method, route template and status, for /metrics.

    A `prometheus_client` counter and histogram in a registry of their own: observations are
    bucketed as they come, so memory stays bounded by the number of series and counts never stop
    growing between scrapes.
    """

    def __init__(self, buckets_s: Sequence[float] = DEFAULT_BUCKETS_S) -> None:
        self.buckets_s = tuple(buckets_s)
        self.registry = CollectorRegistry()
        self.requests = Counter(_HTTP_TOTAL[0], _HTTP_TOTAL[1], ("method", "route", "status"), registry=self.registry)
        self.latency = PromHistogram(
            _HTTP_TIME[0], _HTTP_TIME[1], ("method", "route"), registry=self.registry, buckets=self.buckets_s
        )
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request that took `seconds`."""
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:
            # `labels()` checks and locks on every call; a series' children, once made, are kept
            # (as many as the series, which the route templates bound).
            verb = method.upper()
            series = self._series[key] = (
                self.requests.labels(verb, route, str(status)),
                self.latency.labels(verb, route),
            )
        series[0].inc()
        series[1].observe(seconds)

    def collect(self) -> Iterator[Metric]:
        """The two families, without the `_created` timestamps (not part of these metrics)."""
        for metric in self.registry.collect():
            yield replace_samples(metric, [s for s in metric.samples if not s.name.endswith("_created")])


def replace_samples(metric: Metric, samples: list[Sample]) -> Metric:
    """A copy of `metric` holding `samples` instead of its own."""
    copy = Metric(metric.name, metric.documentation, metric.type, metric.unit)
    copy.samples = samples
    return copy


class SnapshotCollector(Collector):
    """Presents one `PromSnapshot` to a `prometheus_client` registry.

    Every family is declared even without samples; samples with the same labels are summed, so
    two figures for one tool add up rather than repeat. The HTTP families come from `http` when
    given (the live counters), else from the snapshot's own `http` figures.
    """

    def __init__(self, snapshot: PromSnapshot, *, http: HttpMetrics | None = None) -> None:
        self.snapshot = snapshot
        self.http = http

    def collect(self) -> Iterator[Metric]:
        """The families, in a fixed order."""
        snap = self.snapshot
        executions: dict[tuple[str, ...], float] = defaultdict(float)
        durations: dict[tuple[str, ...], Histogram] = {}
        for t in snap.tools:
            for status in EXECUTION_STATUSES:
                executions[(t.tool, t.category, status)] += getattr(t, status)
            _merge(durations, (t.tool,), t.duration_histogram(snap.buckets_s))
        denied: dict[tuple[str, ...], float] = defaultdict(float)
        for d in snap.denials:
            denied[(d.tool, d.reason)] += d.count
        users: dict[tuple[str, ...], float] = defaultdict(float)
        for u in snap.users:
            for ended in (*EXECUTION_STATUSES, CallStatus.DENIED):
                users[(u.user, ended)] += getattr(u, ended)

        yield _counter(
            "tool_execution_total",
            "Tool executions that ended, by tool, category and status.",
            ("tool", "category", "status"),
            executions,
        )
        yield _histogram(
            "tool_execution_duration_seconds", "Tool execution time in seconds, by tool.", ("tool",), durations
        )
        yield _counter(
            "tool_permission_denied_total",
            "Tool calls refused by the permission gate, by tool and reason.",
            ("tool", "reason"),
            denied,
        )
        yield _counter(
            "tool_rate_limited_total",
            "Tool calls refused by the rate limiter, by tool.",
            ("tool",),
            {(tool,): count for tool, count in snap.rate_limited.items()},
        )
        yield GaugeMetricFamily("tool_executions_active", "Tool executions running now.", value=snap.active)
        yield _counter(
            "tool_user_executions_total",
            "Tool executions per user, by status (denied included).",
            ("user", "status"),
            users,
        )
        discovery = GaugeMetricFamily("tool_discovery_count", "Tools discoverable per agent.", labels=("agent_id",))
        for agent_id, count in snap.discovery.items():
            discovery.add_metric((agent_id,), count)
        yield discovery
        if snap.queue is not None:
            jobs = GaugeMetricFamily(
                "toolagent_queue_jobs", "Jobs of the workers' queue, by queue and status.", labels=("queue", "status")
            )
            for key in sorted(snap.queue):
                jobs.add_metric(key, snap.queue[key])
            yield jobs
        if snap.workers is not None:
            yield GaugeMetricFamily("toolagent_workers", "Workers with a live heartbeat.", value=snap.workers)
        if self.http is not None:
            yield from self.http.collect()
            return
        http_total: dict[tuple[str, ...], float] = defaultdict(float)
        http_time: dict[tuple[str, ...], Histogram] = {}
        for h in snap.http:
            http_total[(h.method.upper(), h.route, str(h.status))] += h.count
            hist = h.histogram if h.histogram is not None else Histogram.from_values(h.durations_s, snap.buckets_s)
            _merge(http_time, (h.method.upper(), h.route), hist)
        yield _counter(*_HTTP_TOTAL, ("method", "route", "status"), http_total)
        yield _histogram(*_HTTP_TIME, ("method", "route"), http_time)


def _merge(into: dict[tuple[str, ...], Histogram], key: tuple[str, ...], hist: Histogram) -> None:
    into[key] = into[key].merged(hist) if key in into else hist


def _counter(name: str, doc: str, labels: Sequence[str], values: Mapping[tuple[str, ...], float]) -> Metric:
    family = CounterMetricFamily(name, doc, labels=labels)
    for key in sorted(values):
        family.add_metric(key, values[key])
    return family


def _histogram(name: str, doc: str, labels: Sequence[str], values: Mapping[tuple[str, ...], Histogram]) -> Metric:
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key in sorted(values):
        h = values[key]
        buckets = [(floatToGoString(b), c) for b, c in zip(h.buckets, h.counts, strict=True)]
        family.add_metric(key, [*buckets, ("+Inf", h.count)], h.sum)
    return family


def render(snapshot: PromSnapshot, *, http: HttpMetrics | None = None) -> str:
    """The Prometheus text exposition of `snapshot` (and of `http`'s live series), ending with a newline."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snapshot, http=http))
    return generate_latest(registry).decode("utf-8")


__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_BUCKETS_S",
    "EXECUTION_STATUSES",
    "Histogram",
    "HttpMetrics",
    "PromDenial",
    "PromHttpFigures",
    "PromSnapshot",
    "PromToolFigures",
    "PromUserFigures",
    "SnapshotCollector",
    "render",
]
