"""Second pass: place every phrase against the chosen table and the tables it references.

`Resolver(q, found, catalog, table).resolve()` returns a `Plan`: joins, filters, groupings,
aggregates, extra columns and ordering. Column phrases are matched word by word against the
table's columns (`message count`), a referenced table (`user` -> users, through user_id) or
its columns (`user email`, `metric name`). What is left over and is not filler makes the
question fail, naming the words. Filters are placed by `filters.FilterPhrases`, which this
builds on; the plan's records are in `plan`.
"""

from __future__ import annotations

from .columns import Match, Ref
from .filters import FilterPhrases
from .phrases import BUCKETS, TIME_NOUNS
from .plan import Group, Order, Plan, PlannedAggregate
from .question import FILLER, NotUnderstood
from .table_choice import outside_mentions


class Resolver(FilterPhrases):
    """Places the rest of the question against the primary table and its references."""

    def resolve(self) -> Plan:
        """Resolve everything, or raise NotUnderstood."""
        self._quoted()
        self._emails_and_ids()
        self._value_pairs()
        self._date_filters()
        self._comparisons()
        self._aggregates()
        self._groups()
        self._with_columns()
        self._order_phrase()
        self._values()
        self._superlative()
        self._time_verb()
        self._having_group()
        self._table_words()
        self._leftover_columns()
        self._check_leftovers()
        if self.via_value and self.plan.groups and not self.plan.aggregates:
            measure = self.single_measure()
            name = measure.name if measure else "the value"
            raise NotUnderstood(
                f"say whether you want the total or the average of {name} per group "
                f"(e.g. 'total {self.q.original.strip()}' or 'average {self.q.original.strip()}')"
            )
        return self.plan

    # -- aggregates, groups, order ------------------------------------------------------------

    def _aggregates(self) -> None:
        for agg in self.found.aggregates:
            if agg.func == "count" and not agg.distinct:
                self.use_table_words(agg.pos)
                self._add_aggregate(PlannedAggregate("count"), agg.start)
                continue
            m = self.match(agg.pos, numeric=agg.func != "count")
            if m is not None and m.start <= agg.pos + 2:
                self.q.use(m.start, m.end)
                ref = m.ref if m.entity is None or m.ref.via is None else Ref(m.ref.via)
                self._add_aggregate(PlannedAggregate(agg.func, ref, agg.distinct), agg.start)
                continue
            if agg.func == "sum" and self._names_table(agg.pos):
                self.use_table_words(agg.pos)  # "total users" is a count
                self._add_aggregate(PlannedAggregate("count"), agg.start)
                continue
            measure = self.single_measure()
            if (
                agg.func != "count"
                and measure is not None
                and self.value_at(self.words_at(agg.pos)[0] if self.words_at(agg.pos) else agg.pos)
            ):
                # "average nps": a value naming what is measured; the value becomes a filter later.
                self._add_aggregate(PlannedAggregate(agg.func, Ref(measure)), agg.start)
                continue
            what = self.q.span_text(agg.pos, min(len(self.q.tokens), agg.pos + 3)) or "nothing"
            if agg.func == "avg" and self._names_any_table(agg.pos):
                raise NotUnderstood(
                    f"an average of counts ({what!r}) is not supported; ask for the counts per group instead"
                )
            numeric = ", ".join(c.name for c in self.table.columns if c.kind == "numeric" and not c.is_key) or "none"
            raise NotUnderstood(
                f"could not tell what to take the {agg.func} of: {what!r} is not a numeric column of "
                f"{self.table.name} (numeric columns: {numeric})"
            )

    def _names_table(self, start: int) -> bool:
        pos = self.words_at(start, 3)
        return bool(pos) and self.q.tokens[pos[0]].stem in self.table.words

    def _names_any_table(self, start: int) -> bool:
        k = start
        while k < len(self.q.tokens) and self.q.tokens[k].stem in FILLER:
            k += 1
        return k < len(self.q.tokens) and any(self.q.tokens[k].stem == t.head for t in self.catalog.tables.values())

    def _groups(self) -> None:
        if self.subject is not None:
            self._add_group(self.subject)
        if self.found.bucket is not None:
            self._group_by_time(self.found.bucket)
        subject = self._topn_subject()
        for keyword, start in self.found.by_phrases:
            if start in self._agg_index:  # "by total message count": order by that aggregate
                self.plan.order.append(Order("agg", True, agg=self._agg_index[start]))
                continue
            pos = self.words_at(start, 3)
            if not pos:
                raise NotUnderstood(f"{keyword!r} is not followed by anything to group or order by")
            word = self.q.tokens[pos[0]]
            if word.text in TIME_NOUNS or word.stem in TIME_NOUNS:
                self.q.use(pos[0], pos[0] + 1)
                self._group_by_time(word.text if word.text in TIME_NOUNS else word.stem)
                self._more_groups(pos[0] + 1)
                continue
            if word.stem in ("dat", "time", "recency"):
                self.q.use(pos[0], pos[0] + 1)
                self._temporal(self.date_column(None), keyword)
                continue
            if word.stem in ("count", "number", "size", "popularity", "volume") or (
                word.stem in self.table.words and subject is not None
            ):
                self.q.use(pos[0], pos[0] + 1)
                self.use_table_words(pos[0] + 1)
                self.plan.order.append(Order("count", True))
                continue
            m = self.match(start)
            if m is None:
                raise NotUnderstood(
                    f"could not understand {keyword} {self.q.span_text(pos[0], pos[-1] + 1)!r}: no column of "
                    f"{self.table.name} or of a table it references is named like that "
                    f"(columns: {', '.join(c.name for c in self.table.columns)})"
                )
            self.q.use(m.start, m.end)
            col = m.ref.column
            if m.entity is None and col.kind == "temporal":
                self._temporal(m.ref, keyword)
            elif m.entity is None and col.kind == "numeric" and not col.is_key and keyword == "by":
                if subject is not None or self.plan.groups:
                    index = self._add_aggregate(PlannedAggregate("sum", m.ref))
                    self.plan.order.append(Order("agg", True, agg=index))
                else:
                    self._order_by(m.ref, True if self.found.descending is None else self.found.descending)
            else:
                self._add_group(m)
                self._more_groups(m.end)
        if subject is not None:
            self._add_group(subject)

    def _more_groups(self, end: int) -> None:
        """`by role and plan`: further grouping keys after `and`."""
        toks = self.q.tokens
        while end < len(toks) and toks[end].text == "and" and not toks[end].used:
            word = toks[end + 1] if end + 1 < len(toks) else None
            if word is not None and not word.used and (word.text in BUCKETS or word.stem in BUCKETS):
                self.q.use(end, end + 2)
                self._group_by_time(BUCKETS.get(word.text) or BUCKETS[word.stem])
                end += 2
                continue
            m = self.match(end + 1)
            if m is None or m.start != end + 1 or (m.entity is None and m.ref.column.kind == "numeric"):
                return
            self.q.use(end, m.end)
            self._add_group(m)
            end = m.end

    def _topn_subject(self) -> Match | None:
        start = self.found.topn_subject
        if start is None:
            return None
        m = self.match(start)
        if m is None or m.start != start:
            return None
        if m.entity is not None or m.ref.column.kind in ("text", "boolean") or m.ref.column.references is not None:
            self.q.use(m.start, m.end)
            return m
        return None

    def _add_group(self, m: Match) -> None:
        sql = self.sql_of(m.ref)
        if any(g.sql == sql for g in self.plan.groups):
            return
        if m.entity is not None and m.ref.via is not None:
            note = f"{m.entity.name}.{m.ref.column.name} (through {m.ref.via.name})"
        elif m.ref.via is not None:
            note = f"{m.ref.column.table}.{m.ref.column.name}"
        else:
            note = m.ref.column.name
        self.plan.groups.append(Group(sql, self.alias(m.ref), note))

    def _time_verb(self) -> None:
        """`ended conversations` with no date phrase: the timestamp is set (when it can be unset)."""
        hint = self.found.time_hint
        if hint is None or self.time_hint_used:
            return
        for ref in [Ref(c) for c in self.table.columns] + [
            Ref(c, via=fk) for fk, o in self.neighbours for c in o.columns
        ]:
            if ref.column.kind == "temporal" and hint in ref.column.core:
                if ref.column.nullable:
                    self.plan.filters.append(f"{self.sql_of(ref)} IS NOT NULL")
                    self.plan.notes.append(f"{ref.column.name} is set")
                return

    def _having_group(self) -> None:
        if self.plan.having and not self.plan.groups:
            subject = self._unused_group_column()
            if subject is None:
                raise NotUnderstood(
                    "a condition on a number of rows needs something to group by (e.g. 'agents with more than 100 conversations')"
                )
            self._add_group(subject)

    def _group_by_time(self, unit: str) -> None:
        hints = [r.hint for r in self.found.date_ranges if r.hint]
        ref = self.date_column(hints[0] if hints else None)
        self.plan.groups.append(
            Group(f"date_trunc('{unit}', {self.sql_of(ref)})", unit, f"{unit} of {ref.column.name}", True)
        )

    def _temporal(self, ref: Ref, keyword: str) -> None:
        """`by date`: with an aggregate, one group per day; otherwise newest first."""
        if self.plan.aggregates and (keyword != "by" or (not self.found.by_date and self.found.limit is None)):
            self.plan.groups.append(
                Group(f"date_trunc('day', {self.sql_of(ref)})", "day", f"day of {ref.column.name}", True)
            )
            return
        self._order_by(ref, True if self.found.descending is None else self.found.descending)

    def _order_by(self, ref: Ref, descending: bool) -> None:
        self.plan.order.append(
            Order("col", descending, self.sql_of(ref), nulls_last=ref.column.nullable, note=ref.column.name)
        )

    def _with_columns(self) -> None:
        """`with user email`: a column of a referenced table added to the rows (joined)."""
        for _, start in self.found.with_phrases:
            if start >= len(self.q.tokens) or self.q.tokens[start].used:
                continue
            m = self.match(start)
            if m is None or m.start != start or m.ref.via is None:
                continue  # the primary table's own columns are placed later (or are in SELECT *)
            self.q.use(m.start, m.end)
            alias = "_".join([*m.ref.via.core, m.ref.column.name]) if m.entity is not None else self.alias(m.ref)
            self.plan.extra.append((m.ref, alias))
            self.sql_of(m.ref)

    def _order_phrase(self) -> None:
        start = self.found.order_phrase
        if start is None:
            return
        pos = self.words_at(start, 3)
        if pos and self.q.tokens[pos[0]].stem in ("dat", "time"):
            self.q.use(pos[0], pos[0] + 1)
            self._order_by(self.date_column(None), True if self.found.descending is None else self.found.descending)
            return
        if pos and self.q.tokens[pos[0]].stem in ("count", "number"):
            self.q.use(pos[0], pos[0] + 1)
            self.plan.order.append(Order("count", True if self.found.descending is None else self.found.descending))
            return
        m = self.match(start)
        if m is None:
            raise NotUnderstood(f"could not understand what to order by: {self.q.span_text(start, start + 3)!r}")
        self.q.use(m.start, m.end)
        if m.entity is None and m.ref.column.kind == "numeric" and self.plan.groups and not m.ref.column.is_key:
            index = self._add_aggregate(PlannedAggregate("sum", m.ref))
            self.plan.order.append(
                Order("agg", True if self.found.descending is None else self.found.descending, agg=index)
            )
            return
        default = m.ref.column.kind in ("numeric", "temporal")
        self._order_by(m.ref, self.found.descending if self.found.descending is not None else default)

    def _superlative(self) -> None:
        if self.found.superlative is None:
            return
        descending, start = self.found.superlative
        m = self.match(start, numeric=True)
        if m is not None and m.start <= start + 2:
            self.q.use(m.start, m.end)
            if self.plan.groups:
                index = self._add_aggregate(PlannedAggregate("max" if descending else "min", m.ref))
                self.plan.order.append(Order("agg", descending, agg=index))
            else:
                self._order_by(m.ref, descending)
                self.plan.limit = self.plan.limit or 1
            return
        k = start
        while k < len(self.q.tokens) and self.q.tokens[k].stem in FILLER and not self.q.tokens[k].used:
            k += 1
        if k < len(self.q.tokens) and self.q.tokens[k].stem in {*self.table.words, "count", "number"}:
            self.use_table_words(k)
            if not self.plan.groups:
                subject = self._unused_group_column()
                if subject is None:
                    raise NotUnderstood(
                        f"could not tell what to rank by number of {self.table.name}: name a column to group by"
                    )
                self._add_group(subject)
            self.plan.order.append(Order("count", descending))
            self.plan.limit = self.plan.limit or 1
            return
        raise NotUnderstood(f"could not tell what 'most' or 'least' refers to in {self.q.original!r}")

    def _unused_group_column(self) -> Match | None:
        for i, tok in enumerate(self.q.tokens):
            if tok.used or tok.stem in FILLER:
                continue
            m = self.match(i)
            if m is not None and m.start == i and (m.entity is not None or m.ref.column.kind == "text"):
                self.q.use(m.start, m.end)
                return m
        return None

    # -- what is left -------------------------------------------------------------------------

    def _table_words(self) -> None:
        """The table's own name words (`kpi` of kpi_data); `kpi values` names the table's rows."""
        toks = self.q.tokens
        for i, tok in enumerate(toks):
            if tok.used or tok.stem not in self.table.words:
                continue
            self.q.use(i, i + 1)
            m = self.match(i + 1) if i + 1 < len(toks) else None
            if m is not None and m.start == i + 1 and m.entity is None and m.ref.via is None:
                self.q.use(m.start, m.end)

    def _leftover_columns(self) -> None:
        if self.plan.aggregates or self.plan.groups:
            return
        for i, tok in enumerate(self.q.tokens):
            if tok.used or tok.kind != "word" or tok.stem in FILLER:
                continue
            m = self.match(i)
            if m is None or m.start != i:
                continue
            self.q.use(m.start, m.end)
            self.plan.select.append((m.ref, self.alias(m.ref)))
            self.sql_of(m.ref)

    def _check_leftovers(self) -> None:
        left = self.q.leftovers()
        if not left:
            return
        error = outside_mentions(self.q, self.catalog, self.outside)
        if error is not None:
            raise error
        words = " ".join(repr(t.value) if t.kind == "quoted" else t.text for t in left)
        raise NotUnderstood(
            f"could not understand {words!r} in {self.q.original!r} (answering from {self.table.name}; "
            f"its columns: {', '.join(c.name for c in self.table.columns)})"
        )


__all__ = ["Resolver"]
