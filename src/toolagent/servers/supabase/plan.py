"""The plan of one question: what the resolver places and the SQL builder turns into a statement."""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog import Column, Table
from .columns import Ref


@dataclass(frozen=True)
class Group:
    """One GROUP BY key."""

    sql: str
    alias: str
    note: str
    is_time: bool = False


@dataclass(frozen=True)
class Order:
    """An ORDER BY item: a column (`sql`), the row count (`count`) or aggregate number `agg`."""

    kind: str
    descending: bool
    sql: str = ""
    agg: int = -1
    nulls_last: bool = False
    note: str = ""


@dataclass
class PlannedAggregate:
    """An aggregate with its operand (None: COUNT(*))."""

    func: str
    ref: Ref | None = None
    distinct: bool = False


@dataclass
class Plan:
    """Everything the SQL builder needs."""

    table: Table
    joins: dict[str, Column] = field(default_factory=dict)
    filters: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    aggregates: list[PlannedAggregate] = field(default_factory=list)
    select: list[tuple[Ref, str]] = field(default_factory=list)
    extra: list[tuple[Ref, str]] = field(default_factory=list)
    order: list[Order] = field(default_factory=list)
    having: list[str] = field(default_factory=list)
    limit: int | None = None
    descending: bool | None = None


__all__ = ["Group", "Order", "Plan", "PlannedAggregate"]
