"""Offline, deterministic analysis of query results: per-column statistics and a summary.

`analyze(rows, columns, prompt)` takes rows as objects (keyed by column) or arrays (in
`columns` order) and returns `AnalysisResult`:

* numeric columns: count, min, max, mean, median, population standard deviation, sum and
  outliers: values with |z| > 3, or (with at least 5 values and a non-zero interquartile
  range) values beyond 3 IQR outside the quartiles. Identifier columns (`id`, `*_id`) get
  statistics but no outliers and no highlights.
* date columns (ISO 8601 text, as execute-sql returns them): earliest, latest, span in days.
* text and boolean columns: distinct count and the five most frequent values.

The summary is markdown: the row count, one line per column, and highlights (the largest
and smallest rows of the first measure by the first label column, outliers, truncation).
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .models import AnalysisResult, AnalysisStats, ColumnStats, Outlier, ValueCount

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}(:?\d{2})?)?")
_TOP_VALUES = 5
_MAX_OUTLIERS = 10
_Z_LIMIT = 3.0
_IQR_FACTOR = 3.0


def _is_id(name: str) -> bool:
    return name.lower() == "id" or name.lower().endswith("_id")


def _rounded(value: float) -> float:
    return round(value, 6)


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.2f}"


def _parse_date(text: str) -> datetime | None:
    if not _DATE.fullmatch(text.strip()):
        return None
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    return None


def normalize_rows(rows: Sequence[Any], columns: Sequence[str] | None) -> tuple[list[str], list[list[Any]]]:
    """Rows as lists in column order, and the column names.

    Objects give their keys (in first-seen order) unless `columns` is given; arrays take
    `columns`, or `column_1`, `column_2`...; a scalar row is one column called `value`.
    """
    names: list[str] = list(columns or [])
    if not names:
        for row in rows:
            if isinstance(row, dict):
                names.extend(k for k in row if k not in names)
        if not names and rows:
            width = max((len(r) if isinstance(r, (list, tuple)) else 1) for r in rows)
            names = (
                ["value"]
                if all(not isinstance(r, (list, tuple)) for r in rows)
                else [f"column_{i + 1}" for i in range(width)]
            )
    table: list[list[Any]] = []
    for row in rows:
        if isinstance(row, dict):
            table.append([row.get(n) for n in names])
        elif isinstance(row, (list, tuple)):
            table.append([row[i] if i < len(row) else None for i in range(len(names))])
        else:
            table.append([row] + [None] * (len(names) - 1))
    return names, table


def _numeric_stats(name: str, values: list[float], count_all: int) -> ColumnStats:
    n = len(values)
    mean = statistics.fmean(values)
    stddev = statistics.pstdev(values) if n > 1 else 0.0
    outliers: list[Outlier] = []
    return ColumnStats(
        name=name,
        kind="numeric",
        count=n,
        nulls=count_all - n,
        distinct=len(set(values)),
        min=_rounded(min(values)),
        max=_rounded(max(values)),
        mean=_rounded(mean),
        median=_rounded(statistics.median(values)),
        stddev=_rounded(stddev),
        sum=_rounded(math.fsum(values)),
        outliers=outliers,
    )


def _outliers(column: list[Any], mean: float, stddev: float) -> list[Outlier]:
    indexed = [(i, v) for i, v in enumerate(column) if _as_number(v) is not None]
    values = [float(v) for _, v in indexed]
    fences: tuple[float, float] | None = None
    if len(values) >= 5:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
        if q3 > q1:
            fences = (q1 - _IQR_FACTOR * (q3 - q1), q3 + _IQR_FACTOR * (q3 - q1))
    found: list[Outlier] = []
    for i, v in indexed:
        value = float(v)
        z = (value - mean) / stddev if stddev > 0 else None
        by_z = z is not None and abs(z) > _Z_LIMIT
        by_iqr = fences is not None and not fences[0] <= value <= fences[1]
        if by_z or by_iqr:
            found.append(Outlier(row=i, value=_rounded(value), z_score=None if z is None else round(z, 3)))
    found.sort(key=lambda o: (-(abs(o.z_score) if o.z_score is not None else 0.0), o.row))
    return found[:_MAX_OUTLIERS]


def _column_stats(name: str, column: list[Any]) -> ColumnStats:
    present = [v for v in column if v is not None]
    nulls = len(column) - len(present)
    if not present:
        return ColumnStats(name=name, kind="empty", count=0, nulls=nulls, distinct=0)
    if all(isinstance(v, bool) for v in present):
        counts = Counter("true" if v else "false" for v in present)
        top = [ValueCount(value=k, count=c) for k, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
        return ColumnStats(
            name=name, kind="boolean", count=len(present), nulls=nulls, distinct=len(counts), top_values=top
        )
    numbers = [_as_number(v) for v in present]
    if all(n is not None for n in numbers):
        values = [float(n) for n in numbers if n is not None]
        stats = _numeric_stats(name, values, len(column))
        if not _is_id(name) and stats.mean is not None and stats.stddev is not None:
            stats.outliers = _outliers(
                column, statistics.fmean(values), statistics.pstdev(values) if len(values) > 1 else 0.0
            )
        return stats
    if all(isinstance(v, str) for v in present):
        dates = [_parse_date(v) for v in present]
        if all(d is not None for d in dates):
            moments = sorted(d for d in dates if d is not None)
            span = (moments[-1] - moments[0]).total_seconds() / 86400
            return ColumnStats(
                name=name, kind="datetime", count=len(present), nulls=nulls, distinct=len(set(present)),
                earliest=moments[0].isoformat(), latest=moments[-1].isoformat(), span_days=round(span, 3),
            )  # fmt: skip
    texts = [v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str) for v in present]
    counts = Counter(texts)
    top = [
        ValueCount(value=k, count=c) for k, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:_TOP_VALUES]
    ]
    return ColumnStats(name=name, kind="text", count=len(present), nulls=nulls, distinct=len(counts), top_values=top)


def _column_line(s: ColumnStats, total: int) -> str | None:
    if s.kind == "numeric" and not _is_id(s.name):
        line = f"- **{s.name}**: average {_fmt(s.mean)} (min {_fmt(s.min)}, median {_fmt(s.median)}, max {_fmt(s.max)})"
        if s.count > 1 and s.sum is not None:
            line += f", total {_fmt(s.sum)}"
        if s.outliers:
            line += f"; {len(s.outliers)} outlier{'s' if len(s.outliers) != 1 else ''}"
        return line
    if s.kind == "datetime":
        return f"- **{s.name}**: from {s.earliest} to {s.latest} ({_fmt(s.span_days)} days)"
    if s.kind in ("text", "boolean") and s.top_values:
        if s.distinct == s.count and s.count > 1:
            return f"- **{s.name}**: {s.distinct} distinct values"
        parts = [f"{v.value} ({v.count}, {v.count / total:.0%})" for v in s.top_values[:3]]
        return f"- **{s.name}**: {s.distinct} distinct; most common {', '.join(parts)}"
    if s.kind == "empty":
        return f"- **{s.name}**: no values"
    return None


def _highlights(stats: list[ColumnStats], names: list[str], rows: list[list[Any]], truncated: bool | None) -> list[str]:
    out: list[str] = []
    measures = [s for s in stats if s.kind == "numeric" and not _is_id(s.name)]
    labels = [s for s in stats if s.kind in ("text", "datetime") and not _is_id(s.name)]
    # Prefer a label that names each row once (a grouping key, a title), then any label.
    labels.sort(key=lambda s: (s.distinct != s.count + s.nulls or s.nulls > 0, s.kind != "text"))
    if measures and labels and len(rows) > 1:
        m, label = measures[0], labels[0]
        mi, li = names.index(m.name), names.index(label.name)
        ranked = sorted(
            ((float(r[mi]), str(r[li])) for r in rows if _as_number(r[mi]) is not None), key=lambda p: (-p[0], p[1])
        )
        if ranked:
            (top_v, top_l), (low_v, low_l) = ranked[0], ranked[-1]
            share = ""
            if m.sum and m.sum > 0 and m.min is not None and m.min >= 0:
                share = f", {top_v / m.sum:.0%} of the total"
            out.append(f"Highest {m.name}: {top_l} with {_fmt(top_v)}{share}.")
            out.append(f"Lowest {m.name}: {low_l} with {_fmt(low_v)}.")
    for s in measures:
        for o in s.outliers[:3]:
            z = f" (z = {o.z_score:.1f})" if o.z_score is not None else ""
            out.append(f"Outlier in {s.name}: {_fmt(o.value)} in row {o.row + 1}{z}.")
    if truncated:
        out.append("The result was truncated: the query had more rows than were returned.")
    return out


def analyze(
    rows: Sequence[Any],
    columns: Sequence[str] | None = None,
    prompt: str | None = None,
    *,
    truncated: bool | None = None,
) -> AnalysisResult:
    """Statistics and a markdown summary of `rows` (see the module docstring)."""
    names, table = normalize_rows(rows, columns)
    stats = [_column_stats(name, [row[i] for row in table]) for i, name in enumerate(names)]
    audience = " for stakeholders" if prompt and "stakeholder" in prompt.lower() else ""
    lines = [f"## Summary{audience}", ""]
    if prompt:
        lines += [f"_Request: {prompt.strip()}_", ""]
    lines.append(f"**{len(table)} row{'s' if len(table) != 1 else ''}** analysed" + (
        f" across {len(names)} column{'s' if len(names) != 1 else ''}." if names else "."
    ))  # fmt: skip
    column_lines = [line for s in stats if (line := _column_line(s, max(len(table), 1)))]
    if column_lines:
        lines += ["", *column_lines]
    highlights = _highlights(stats, names, table, truncated)
    if highlights:
        lines += ["", "### Highlights", *(f"- {h}" for h in highlights)]
    if not table:
        lines += ["", "The query returned no rows, so there is nothing to analyse."]
    return AnalysisResult(summary="\n".join(lines), stats=AnalysisStats(row_count=len(table), columns=stats))
