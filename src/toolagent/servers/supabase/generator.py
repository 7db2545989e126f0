"""The offline SQL generator: a natural-language analytics question -> one PostgreSQL SELECT.

Deterministic (the same question and schema give the same SQL) and driven by the live schema
in a `Catalog`: table and column names, foreign keys, and the values seen in categorical text
columns. It understands, in any order:

* counts (`how many users`), distinct counts, averages, sums, minimums and maximums of numeric
  columns (`average message count`, `total message_count per agent`);
* grouping by columns, a referenced table (`per metric` groups by the metric's name through
  the foreign key) or a time bucket (`per month`, `monthly`);
* top-N and ordering (`top 10 conversations by date`, `5 most recent`, `oldest`,
  `top 5 agents by conversations`, `ordered by message count`);
* filters: values seen in the data (`failed conversations`, `users on the team plan`), quoted
  values after a column (`title containing 'refund'`), emails, ids (`user 42`), numeric
  comparisons (`more than 50 messages`) and date ranges (`last 30 days`, `in 2026`,
  `this year`, `last month`, `in March 2026`, `since 2026-01-01`);
* joins along foreign keys (`conversations with user email`, `kpi values with metric name`).

Every statement has a LIMIT (the N asked for, capped by max_rows) and an ORDER BY that makes
the rows it returns deterministic. A question with words it cannot place fails with
`NotUnderstood`, naming them: a guess would give a confident wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .catalog import Catalog
from .columns import QUALIFIER
from .phrases import scan
from .plan import Order, Plan, PlannedAggregate
from .question import NotUnderstood, Question, quote_ident
from .resolver import Resolver
from .table_choice import choose_table

__all__ = ["Generated", "NotUnderstood", "generate_sql"]


@dataclass(frozen=True)
class Generated:
    """A generated statement, the tables it reads and what it computes."""

    sql: str
    tables: tuple[str, ...]
    explanation: str


def _aggregate(resolver: Resolver, agg: PlannedAggregate) -> tuple[str, str, str]:
    """(SQL, alias, words) of one aggregate."""
    if agg.ref is None:
        return "COUNT(*)", "count", "the number of rows"
    col = resolver.sql_of(agg.ref)
    name = agg.ref.column.name
    if agg.func == "count":
        return f"COUNT(DISTINCT {col})", f"distinct_{name}", f"the number of distinct {name} values"
    if agg.func == "avg":
        return f"ROUND(AVG({col})::numeric, 2)", f"avg_{name}", f"the average {name}"
    if agg.func == "sum":
        return f"SUM({col})", f"total_{name}", f"the total {name}"
    word = "largest" if agg.func == "max" else "smallest"
    return f"{agg.func.upper()}({col})", f"{agg.func}_{name}", f"the {word} {name}"


def _unique_aliases(aliases: list[str]) -> list[str]:
    out: list[str] = []
    for alias in aliases:
        candidate, n = alias, 2
        while candidate in out:
            candidate, n = f"{alias}_{n}", n + 1
        out.append(candidate)
    return out


def _order_sql(item: Order, aggregates: list[tuple[str, str, str]], resolver: Resolver) -> str:
    if item.kind == "count":
        alias = next((a for s, a, _ in aggregates if s == "COUNT(*)"), None)
        if alias is None:
            raise NotUnderstood(
                "ordering by a count needs something to group by (e.g. 'top 5 agents by conversations')"
            )
        sql = quote_ident(alias)
    elif item.kind == "agg":
        sql = quote_ident(aggregates[item.agg][1])
    else:
        sql = item.sql
    return f"{sql} {'DESC' if item.descending else 'ASC'}" + (
        " NULLS LAST" if item.nulls_last and item.descending else ""
    )


def _render(sql: str, joined: bool) -> str:
    """Resolve the table qualifiers: `table.col` when the query joins, `col` otherwise."""
    parts = sql.split(QUALIFIER)
    out = [parts[0]]
    # Qualified names come as QUALIFIER table QUALIFIER column.
    for i in range(1, len(parts), 2):
        table, rest = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        out.append((f"{table}." if joined else "") + rest)
    return "".join(out)


def build_sql(resolver: Resolver, plan: Plan, max_rows: int) -> Generated:
    """The SELECT for a resolved plan."""
    table = plan.table
    rows = min(plan.limit, max_rows) if plan.limit else max_rows
    aggregates = [_aggregate(resolver, a) for a in plan.aggregates]
    if plan.groups and not aggregates:
        aggregates = [("COUNT(*)", "count", "the number of rows")]
    aliases = _unique_aliases([g.alias for g in plan.groups] + [a for _, a, _ in aggregates])
    group_aliases, agg_aliases = aliases[: len(plan.groups)], aliases[len(plan.groups) :]
    aggregates = [(s, a, d) for (s, _, d), a in zip(aggregates, agg_aliases)]
    explanation: list[str] = []
    order = [_order_sql(o, aggregates, resolver) for o in plan.order]
    if aggregates:
        select = [f"{g.sql} AS {quote_ident(a)}" for g, a in zip(plan.groups, group_aliases)]
        select += [f"{s} AS {quote_ident(a)}" for s, a, _ in aggregates]
        what = " and ".join(d for *_, d in aggregates)
        per = f" per {', '.join(g.note for g in plan.groups)}" if plan.groups else ""
        explanation.append(f"Computes {what} in {table.name}{per}")
        if plan.groups:
            keys = [quote_ident(a) for a in group_aliases]
            if not order:
                times = [k for g, k in zip(plan.groups, keys) if g.is_time]
                order = [f"{k} ASC" for k in times]
                if len(times) < len(keys):
                    order.append(f"{quote_ident(aggregates[0][1])} DESC")
            order += [f"{k} ASC" for k in keys if not any(o.startswith(f"{k} ") for o in order)]
    else:
        if plan.select:
            select = [
                resolver.sql_of(r) + (f" AS {quote_ident(a)}" if r.via is not None else "") for r, a in plan.select
            ]
        else:
            select = [f"{QUALIFIER}{quote_ident(table.name)}{QUALIFIER}*"]
        select += [f"{resolver.sql_of(r)} AS {quote_ident(a)}" for r, a in plan.extra]
        shown = ", ".join(a for _, a in plan.select) if plan.select else "rows"
        explanation.append(f"Lists {shown} of {table.name}")
        if plan.extra:
            explanation[-1] += " with " + ", ".join(f"{r.column.table}.{r.column.name}" for r, _ in plan.extra)
        if not plan.order and table.main_date is not None:
            descending = True if plan.descending is None else plan.descending
            main = table.main_date
            plan.order.append(
                Order("col", descending, resolver.sql_of_column(main), nulls_last=main.nullable, note=main.name)
            )
            order = [_order_sql(plan.order[0], aggregates, resolver)]
        first_desc = plan.order[0].descending if plan.order else False
        # The primary key last, so equal sort values still come back in one order.
        for key in table.order_key:
            key_sql = resolver.sql_of_column(key)
            if not any(o.startswith(f"{key_sql} ") for o in order):
                order.append(f"{key_sql} {'DESC' if first_desc else 'ASC'}")
    lines = [f"SELECT {', '.join(select)}", f"FROM {quote_ident(table.name)}"]
    for other_name, fk in plan.joins.items():
        target = fk.references[1] if fk.references else "id"
        lines.append(
            f"{'LEFT JOIN' if fk.nullable else 'JOIN'} {quote_ident(other_name)} ON "
            f"{quote_ident(other_name)}.{quote_ident(target)} = {quote_ident(table.name)}.{quote_ident(fk.name)}"
        )
    if plan.filters:
        lines.append("WHERE " + "\n  AND ".join(plan.filters))
    if plan.notes:
        explanation.append("where " + ", ".join(plan.notes))
    if plan.groups and aggregates:
        lines.append("GROUP BY " + ", ".join(g.sql for g in plan.groups))
        if plan.having:
            lines.append("HAVING " + " AND ".join(plan.having))
    if order:
        lines.append("ORDER BY " + ", ".join(order))
        first = plan.order[0] if plan.order else None
        if first is not None and first.note:
            words = ("newest", "oldest") if resolver.is_temporal(first.note) else ("highest", "lowest")
            explanation.append(f"ordered by {first.note} ({words[0] if first.descending else words[1]} first)")
    lines.append(f"LIMIT {rows}")
    explanation.append(f"at most {rows} row{'s' if rows != 1 else ''}")
    text = "; ".join(explanation) + "."
    sql = _render("\n".join(lines), bool(plan.joins))
    head, _, rest = sql.partition("\n")
    head = re.sub(r"(?<![\w.\"])([a-z_][a-z0-9_]*) AS \1(?=,|$)", r"\1", head)  # `status AS status`
    return Generated(
        sql=f"{head}\n{rest}",
        tables=tuple(sorted({table.name, *plan.joins})),
        explanation=text[0].upper() + text[1:],
    )


def generate_sql(question: str, catalog: Catalog, max_rows: int, *, outside: Catalog | None = None) -> Generated:
    """Turn `question` into one PostgreSQL SELECT over the tables of `catalog`.

    Args:
        question: the natural-language question.
        catalog: the tables the statement may read (already narrowed to what is permitted).
        max_rows: the LIMIT when the question asks for no smaller number.
        outside: the whole schema, so that an error can name a table the question needs.

    Raises:
        NotUnderstood: part of the question could not be placed; the message names it.
    """
    if not question or not question.strip():
        raise NotUnderstood("the question is empty")
    q = Question(question)
    found = scan(q, catalog)
    choice = choose_table(q, found, catalog, outside)
    resolver = Resolver(q, found, catalog, choice.table, via_value=choice.via_value, outside=outside)
    try:
        plan = resolver.resolve()
    except NotUnderstood as first:
        if choice.mention is None:
            raise
        # "top 5 users by message count": the named table is the subject; the numbers live in
        # a table that references it. Try each such table, grouping by the named one.
        for name in sorted(catalog.tables):
            links = [fk for fk, other in catalog.outgoing(catalog.tables[name]) if other.name == choice.table.name]
            if len(links) != 1:
                continue
            q = Question(question)
            found = scan(q, catalog)
            resolver = Resolver(q, found, catalog, catalog.tables[name], outside=outside,
                                subject=(choice.table, links[0], *choice.mention))  # fmt: skip
            try:
                plan = resolver.resolve()
                break
            except NotUnderstood:
                continue
        else:
            raise first from None
    return build_sql(resolver, plan, max_rows)
