"""Prometheus text exposition (format 0.0.4) of the engine's figures, with the SRS metric names.

The engine turns its metrics snapshot into a `PromSnapshot` (plain frozen records defined here)
and `render` writes the text a scraper reads:

| metric | type | labels |
| --- | --- | --- |
| `tool_execution_total` | counter | tool, category, status (`success`, `failed`, `cancelled`) |
| `tool_execution_duration_seconds` | histogram | tool |
| `tool_permission_denied_total` | counter | tool, reason |
| `tool_rate_limited_total` | counter | tool |
| `tool_executions_active` | gauge | |
| `tool_user_executions_total` | counter | user, status (`success`, `failed`, `cancelled`, `denied`) |
| `tool_discovery_count` | gauge | agent_id |
| `http_requests_total` | counter | method, route, status |
| `http_request_duration_seconds` | histogram | method, route |

Counters must only grow between scrapes; a figure that can shrink (a bounded history) shows
up to Prometheus as a counter reset.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

#: The `Content-Type` of the rendered text.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds (seconds) of the duration histograms; `+Inf` is implied.
DEFAULT_BUCKETS_S: tuple[float, ...] = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
#: `status` label values of `tool_execution_total`.
EXECUTION_STATUSES = ("success", "failed", "cancelled")


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
        if any(b < a for a, b in zip(self.counts, self.counts[1:], strict=False)) or (self.counts and self.counts[-1] > self.count):
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
    """Tools discoverable per agent id (SRS `tool_discovery_count`)."""
    http: Sequence[PromHttpFigures] = ()
    buckets_s: Sequence[float] = DEFAULT_BUCKETS_S
    """Bounds used for raw durations."""


def escape_label_value(value: object) -> str:
    """Escape a label value: backslash, double quote and newline."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """Escape HELP text: backslash and newline."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    """A sample value: integers as integers, `+Inf`, `-Inf`, `NaN`, other floats in shortest form."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


LabelKey = tuple[tuple[str, str], ...]


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.values: dict[LabelKey, float] = defaultdict(float)
        self.histograms: dict[LabelKey, Histogram] = {}

    def add(self, value: float, **labels: object) -> None:
        self.values[_key(labels)] += value

    def set(self, value: float, **labels: object) -> None:
        self.values[_key(labels)] = value

    def observe(self, hist: Histogram, **labels: object) -> None:
        key = _key(labels)
        self.histograms[key] = self.histograms[key].merged(hist) if key in self.histograms else hist

    def render(self, out: list[str]) -> None:
        out.append(f"# HELP {self.name} {escape_help(self.help)}")
        out.append(f"# TYPE {self.name} {self.kind}")
        for key in sorted(self.values):
            out.append(f"{self.name}{_labels(key)} {format_value(_num(self.values[key]))}")
        for key in sorted(self.histograms):
            h = self.histograms[key]
            for bound, count in zip(h.buckets, h.counts, strict=True):
                out.append(f"{self.name}_bucket{_labels(key, ('le', format_value(float(bound))))} {count}")
            out.append(f"{self.name}_bucket{_labels(key, ('le', '+Inf'))} {h.count}")
            out.append(f"{self.name}_sum{_labels(key)} {format_value(float(h.sum))}")
            out.append(f"{self.name}_count{_labels(key)} {h.count}")


def _key(labels: Mapping[str, object]) -> LabelKey:
    return tuple((k, str(v)) for k, v in labels.items())


def _num(value: float) -> float:
    return int(value) if float(value).is_integer() else value


def _labels(key: LabelKey, *more: tuple[str, str]) -> str:
    pairs = [*key, *more]
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs) + "}"


def render(snapshot: PromSnapshot) -> str:
    """The Prometheus text exposition of `snapshot`, ending with a newline.

    Every family gets its HELP and TYPE lines even without samples; samples with the same
    labels are summed, so two figures for one tool add up rather than repeat.
    """
    executions = _Family("tool_execution_total", "counter", "Tool executions that ended, by tool, category and status.")
    durations = _Family("tool_execution_duration_seconds", "histogram", "Tool execution time in seconds, by tool.")
    denied = _Family("tool_permission_denied_total", "counter", "Tool calls refused by the permission gate, by tool and reason.")
    limited = _Family("tool_rate_limited_total", "counter", "Tool calls refused by the rate limiter, by tool.")
    active = _Family("tool_executions_active", "gauge", "Tool executions running now.")
    users = _Family("tool_user_executions_total", "counter", "Tool executions per user, by status (denied included).")
    discovery = _Family("tool_discovery_count", "gauge", "Tools discoverable per agent.")
    http_total = _Family("http_requests_total", "counter", "HTTP requests served, by method, route and status.")
    http_time = _Family("http_request_duration_seconds", "histogram", "HTTP request time in seconds, by method and route.")

    for t in snapshot.tools:
        for status in EXECUTION_STATUSES:
            executions.add(getattr(t, status), tool=t.tool, category=t.category, status=status)
        durations.observe(t.duration_histogram(snapshot.buckets_s), tool=t.tool)
    for d in snapshot.denials:
        denied.add(d.count, tool=d.tool, reason=d.reason)
    for tool, count in snapshot.rate_limited.items():
        limited.add(count, tool=tool)
    active.set(snapshot.active)
    for u in snapshot.users:
        for status in (*EXECUTION_STATUSES, "denied"):
            users.add(getattr(u, status), user=u.user, status=status)
    for agent_id, count in snapshot.discovery.items():
        discovery.set(count, agent_id=agent_id)
    for h in snapshot.http:
        http_total.add(h.count, method=h.method.upper(), route=h.route, status=h.status)
        hist = h.histogram if h.histogram is not None else Histogram.from_values(h.durations_s, snapshot.buckets_s)
        http_time.observe(hist, method=h.method.upper(), route=h.route)

    out: list[str] = []
    for family in (executions, durations, denied, limited, active, users, discovery, http_total, http_time):
        family.render(out)
    return "\n".join(out) + "\n"


__all__ = [
    "CONTENT_TYPE", "DEFAULT_BUCKETS_S", "EXECUTION_STATUSES", "Histogram", "PromDenial", "PromHttpFigures",
    "PromSnapshot", "PromToolFigures", "PromUserFigures", "escape_label_value", "format_value", "render",
]
