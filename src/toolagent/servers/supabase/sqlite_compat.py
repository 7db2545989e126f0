"""Run PostgreSQL-dialect queries on the embedded SQLite database.

`to_sqlite(sql)` transpiles with sqlglot, after rewriting what sqlglot's SQLite writer gets
wrong: interval arithmetic becomes `datetime(x, '+30 days')`, `date_trunc` and `EXTRACT` /
`date_part` call the Python functions `register_functions` installs, and casts to timestamps
become `datetime(x)`. Timestamps are stored as UTC text `YYYY-MM-DD HH:MM:SS`, which these
functions read and write, and which sorts and compares like the instants it names.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlglot
from sqlglot import exp

_TS_FORMAT = "%Y-%m-%d %H:%M:%S"
_INTERVAL_PART = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*([a-z]+)")
_UNIT_ALIASES = {
    "s": "second", "sec": "second", "secs": "second", "second": "second", "seconds": "second",
    "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute",
    "h": "hour", "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour",
    "d": "day", "day": "day", "days": "day",
    "w": "week", "week": "week", "weeks": "week",
    "mon": "month", "mons": "month", "month": "month", "months": "month",
    "y": "year", "yr": "year", "yrs": "year", "year": "year", "years": "year",
}  # fmt: skip
_TIMESTAMP_TYPES = {exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ}


def _interval_modifiers(interval: exp.Interval, sign: int) -> list[str]:
    """SQLite datetime() modifiers for a PostgreSQL interval (`'1 year 2 months'`, `'30' DAYS`)."""
    text = interval.this.name if isinstance(interval.this, exp.Expression) else str(interval.this)
    unit = interval.args.get("unit")
    if unit is not None:
        text = f"{text} {unit.name}"
    modifiers: list[str] = []
    for amount, raw_unit in _INTERVAL_PART.findall(text.lower()):
        unit_name = _UNIT_ALIASES.get(raw_unit)
        if unit_name is None:
            raise ValueError(f"interval unit {raw_unit!r} is not supported on the embedded database")
        value = float(amount) * sign
        if unit_name == "week":
            unit_name, value = "day", value * 7
        number = int(value) if value == int(value) else value
        modifiers.append(f"{number:+} {unit_name}s" if isinstance(number, int) else f"{number:+f} {unit_name}s")
    if not modifiers:
        raise ValueError(f"interval {text!r} is not understood on the embedded database")
    return modifiers


def _datetime_call(base: exp.Expression, modifiers: list[str]) -> exp.Expression:
    return exp.Anonymous(this="datetime", expressions=[base, *(exp.Literal.string(m) for m in modifiers)])


def _unit_name(unit: exp.Expression | None) -> str:
    return (unit.name if unit is not None else "").lower()


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, (exp.Add, exp.Sub)):
        left, right = node.this, node.expression
        sign = -1 if isinstance(node, exp.Sub) else 1
        if isinstance(right, exp.Interval):
            return _datetime_call(left, _interval_modifiers(right, sign))
        if isinstance(left, exp.Interval) and sign == 1:
            return _datetime_call(right, _interval_modifiers(left, 1))
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        return exp.Anonymous(
            this="date_trunc", expressions=[exp.Literal.string(_unit_name(node.args.get("unit"))), node.this]
        )
    if isinstance(node, exp.Extract):
        unit = _unit_name(node.this)
        target = node.expression
        if unit == "epoch" and isinstance(target, exp.Sub):
            # EXTRACT(EPOCH FROM a - b): the seconds between two timestamps.
            return exp.Sub(
                this=exp.Anonymous(this="date_part", expressions=[exp.Literal.string("epoch"), target.this]),
                expression=exp.Anonymous(
                    this="date_part", expressions=[exp.Literal.string("epoch"), target.expression]
                ),
            )
        return exp.Anonymous(this="date_part", expressions=[exp.Literal.string(unit), target])
    if isinstance(node, exp.Cast) and node.to.this in _TIMESTAMP_TYPES:
        return exp.Anonymous(this="datetime", expressions=[node.this])
    return node


def to_sqlite(sql: str) -> str:
    """Transpile one PostgreSQL statement to SQLite.

    Raises:
        ValueError: the statement uses something the embedded database cannot run.
    """
    tree = sqlglot.parse_one(sql, read="postgres")
    if not isinstance(tree, exp.Expression):
        raise ValueError(f"cannot transpile {sql!r}")
    return _rewrite_tree(tree).sql(dialect="sqlite")


def _rewrite_tree(node: exp.Expression) -> exp.Expression:
    # Children first, so `date_trunc(...) + INTERVAL` sees its operand already rewritten
    # (sqlglot's own transform does not descend into a node it has just replaced).
    for child in list(node.iter_expressions()):
        new = _rewrite_tree(child)
        if new is not child:
            child.replace(new)
    return _rewrite(node)


def parse_timestamp(value: Any) -> datetime | None:
    """A naive UTC datetime from SQLite text (`YYYY-MM-DD[ HH:MM:SS][+offset]`), or None."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value, tz=UTC).replace(tzinfo=None)
    try:
        parsed = datetime.fromisoformat(str(value).strip())
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _date_trunc(unit: str | None, value: Any) -> str | None:
    ts = parse_timestamp(value)
    if ts is None or unit is None:
        return None
    unit = unit.lower()
    if unit in ("microsecond", "microseconds", "millisecond", "milliseconds"):
        out = ts
    elif unit in ("second", "seconds"):
        out = ts.replace(microsecond=0)
    elif unit in ("minute", "minutes"):
        out = ts.replace(second=0, microsecond=0)
    elif unit in ("hour", "hours"):
        out = ts.replace(minute=0, second=0, microsecond=0)
    elif unit in ("day", "days"):
        out = ts.replace(hour=0, minute=0, second=0, microsecond=0)
    elif unit in ("week", "weeks"):
        out = (ts - timedelta(days=ts.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    elif unit in ("month", "months"):
        out = ts.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    elif unit in ("quarter", "quarters"):
        out = ts.replace(month=(ts.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0)
    elif unit in ("year", "years"):
        out = ts.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    elif unit in ("decade", "decades"):
        out = datetime(ts.year - ts.year % 10, 1, 1)
    else:
        raise ValueError(f"date_trunc unit {unit!r} is not supported")
    return out.strftime(_TS_FORMAT)


def _date_part(unit: str | None, value: Any) -> float | int | None:
    ts = parse_timestamp(value)
    if ts is None or unit is None:
        return None
    unit = unit.lower()
    parts: dict[str, Any] = {
        "year": lambda: ts.year,
        "month": lambda: ts.month,
        "day": lambda: ts.day,
        "hour": lambda: ts.hour,
        "minute": lambda: ts.minute,
        "second": lambda: ts.second + ts.microsecond / 1e6,
        "quarter": lambda: (ts.month - 1) // 3 + 1,
        "week": lambda: ts.isocalendar()[1],
        "dow": lambda: (ts.weekday() + 1) % 7,
        "isodow": lambda: ts.isoweekday(),
        "doy": lambda: ts.timetuple().tm_yday,
        "decade": lambda: ts.year // 10,
        "epoch": lambda: (ts - datetime(1970, 1, 1)).total_seconds(),
    }
    getter = parts.get(unit.rstrip("s") if unit not in ("dow", "isodow", "doy") else unit)
    if getter is None:
        raise ValueError(f"date_part unit {unit!r} is not supported")
    result = getter()
    return int(result) if isinstance(result, float) and result.is_integer() and unit != "epoch" else result


def register_functions(conn: sqlite3.Connection) -> None:
    """Install the PostgreSQL functions the transpiled SQL calls (`date_trunc`, `date_part`)."""
    conn.create_function("date_trunc", 2, _date_trunc, deterministic=True)
    conn.create_function("date_part", 2, _date_part, deterministic=True)


_SQLITE_TS = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?")


def iso_timestamp(value: Any) -> Any:
    """Render a stored UTC timestamp (`YYYY-MM-DD HH:MM:SS`) as ISO 8601 with `+00:00`, as PostgreSQL's would be."""
    if isinstance(value, str) and _SQLITE_TS.fullmatch(value):
        return value.replace(" ", "T") + "+00:00"
    return value
