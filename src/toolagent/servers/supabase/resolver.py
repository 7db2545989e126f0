"""Second pass: place every phrase against the chosen table and the tables it references.

`Resolver(q, found, catalog, table).resolve()` returns a `Plan`: joins, filters, groupings,
aggregates, extra columns and ordering. Column phrases are matched word by word against the
table's columns (`message count`), a referenced table (`user` -> users, through user_id) or
its columns (`user email`, `metric name`). What is left over and is not filler makes the
question fail, naming the words.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .catalog import Catalog, Column, Table
from .columns import ColumnPhrases, Match, Ref
from .phrases import BUCKETS, TIME_NOUNS, Phrases, outside_mentions
from .question import FILLER, NotUnderstood, Question, number_text, quote_literal

_NEGATIONS = frozenset({"not", "non", "excluding", "except", "without"})
_QUOTE_LEADS = {
    "is": "=", "equals": "=", "named": "=", "called": "=", "titled": "=", "of": "=", "with": "=", "as": "=",
    "like": "contains", "containing": "contains", "contains": "contains", "matching": "contains",
    "mentioning": "contains", "starting": "starts", "starts": "starts", "ending": "ends", "ends": "ends",
}  # fmt: skip


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


class Resolver(ColumnPhrases):
    """Places the rest of the question against the primary table and its references."""

    def __init__(self, q: Question, found: Phrases, catalog: Catalog, table: Table, *,
                 via_value: bool = False, outside: Catalog | None = None,
                 subject: tuple[Table, Column, int, int] | None = None) -> None:  # fmt: skip
        """`subject` (table, foreign key, token span): group by that referenced table, which the
        question names as its subject (`top 5 users by message count` over conversations)."""
        super().__init__(q, found, catalog, table)
        self.outside = outside
        self.via_value = via_value
        self.plan = Plan(table, joins=self.joins, limit=found.limit, descending=found.descending)
        self._agg_index: dict[int, int] = {}
        self.subject: Match | None = None
        if subject is not None:
            other, fk, start, end = subject
            q.use(start, end)
            self.subject = Match(Ref(other.label, via=fk), start, end, other)

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

    # -- filters ----------------------------------------------------------------------------

    def _quoted(self) -> None:
        toks = self.q.tokens
        for i, tok in enumerate(toks):
            if tok.kind != "quoted" or tok.used:
                continue
            op, k = "=", i - 1
            while k >= 0 and not toks[k].used and toks[k].kind == "word" and toks[k].text in _QUOTE_LEADS:
                op = _QUOTE_LEADS[toks[k].text] if _QUOTE_LEADS[toks[k].text] != "=" else op
                k -= 1
            ref, first = None, k + 1
            for s in range(max(0, k - 3), k + 1):
                m = self.match(s)
                if m is not None and m.start == s and m.end == k + 1 and m.entity is None:
                    ref, first = m.ref, m.start
                    break
            if ref is None:
                ref = next((r for r, vs in self.categories() if any(v.lower() == tok.value.lower() for v in vs)), None)
            if ref is None:
                raise NotUnderstood(
                    f"could not tell which column {tok.value!r} is for; put a column name before it"
                    f" (e.g. title {tok.value!r})"
                )
            self._text_filter(ref, tok.value, op)
            self.q.use(first, i + 1)

    def _text_filter(self, ref: Ref, value: str, op: str) -> None:
        col = self.sql_of(ref)
        if op == "=":
            self.plan.filters.append(f"{col} = {quote_literal(value)}")
            self.plan.notes.append(f"{ref.column.name} is {value!r}")
            return
        escaped = value.replace("!", "!!").replace("%", "!%").replace("_", "!_")
        pattern = {"contains": f"%{escaped}%", "starts": f"{escaped}%", "ends": f"%{escaped}"}[op]
        escape = " ESCAPE '!'" if escaped != value else ""
        self.plan.filters.append(f"{col} ILIKE {quote_literal(pattern)}{escape}")
        self.plan.notes.append(f"{ref.column.name} {'contains' if op == 'contains' else op + ' with'} {value!r}")

    def _emails_and_ids(self) -> None:
        toks = self.q.tokens
        for i, tok in enumerate(toks):
            if tok.used:
                continue
            if tok.kind == "email":
                ref = self.email_column()
                if ref is None:
                    raise NotUnderstood(f"there is no email column to match {tok.value!r} against")
                self.plan.filters.append(f"{self.sql_of(ref)} = {quote_literal(tok.value.lower())}")
                self.plan.notes.append(f"{ref.column.name} is {tok.value.lower()!r}")
                start = i - 1 if i > 0 and not toks[i - 1].used and toks[i - 1].stem in ("email", "user") else i
                self.q.use(start, i + 1)
            elif tok.kind == "number" and i > 0:
                k = i - 1
                if not toks[k].used and toks[k].text in ("id", "#", "number", "no"):
                    k -= 1
                if k < 0 or toks[k].kind != "word":
                    continue
                ref = None
                if toks[k].stem == self.table.head and self.table.primary_key:
                    ref = Ref(self.table.column(self.table.primary_key[0]))
                elif not toks[k].used:
                    for c in self.table.columns:
                        other = self.entity_of(c) if c.references else None
                        if c.references is not None and (c.core == (toks[k].stem,) or (other and other.head == toks[k].stem)):
                            ref = Ref(c)
                if ref is not None:
                    self.plan.filters.append(f"{self.sql_of(ref)} = {number_text(tok.value)}")
                    self.plan.notes.append(f"{ref.column.name} is {number_text(tok.value)}")
                    self.q.use(k, i + 1)

    def _negated(self, i: int) -> bool:
        toks = self.q.tokens
        if i >= 2 and toks[i - 1].text == "than" and toks[i - 2].text == "other" and not toks[i - 2].used:
            self.q.use(i - 2, i)
            return True
        if i >= 1 and not toks[i - 1].used and toks[i - 1].text in _NEGATIONS:
            self.q.use(i - 1, i)
            return True
        return False

    def _value_pairs(self) -> None:
        """`plan team`, `team plan`, `status failed`, `org acme`: a value next to its column's name."""
        found: dict[Ref, tuple[list[str], bool]] = {}
        toks = self.q.tokens
        i = 0
        while i < len(toks):
            if toks[i].used:
                i += 1
                continue
            m = self.match(i)
            if m is not None and m.entity is None and m.start == i:
                j = m.end
                while j < len(toks) and not toks[j].used and toks[j].text in ("is", "=", "of", "equals"):
                    j += 1
                hit = self.value_at(j) if j < len(toks) else None
                if hit is not None and hit[1] == m.ref:
                    self._collect(found, m.ref, hit[2], self._negated(i))
                    self.q.use(i, hit[0])
                    i = hit[0]
                    continue
            hit = self.value_at(i)
            if hit is not None:
                m = self.match(hit[0])
                if m is not None and m.ref == hit[1] and m.start == hit[0]:
                    self._collect(found, hit[1], hit[2], self._negated(i))
                    self.q.use(i, m.end)
                    i = m.end
                    continue
            i += 1
        self._emit_values(found)

    def _values(self) -> None:
        found: dict[Ref, tuple[list[str], bool]] = {}
        i = 0
        while i < len(self.q.tokens):
            hit = self.value_at(i) if not self.q.tokens[i].used else None
            if hit is None:
                i += 1
                continue
            self._collect(found, hit[1], hit[2], self._negated(i))
            self.q.use(i, hit[0])
            i = hit[0]
        self._emit_values(found)

    @staticmethod
    def _collect(found: dict[Ref, tuple[list[str], bool]], ref: Ref, value: str, negated: bool) -> None:
        values, neg = found.get(ref, ([], negated))
        if value not in values:
            values.append(value)
        found[ref] = (values, neg or negated)

    def _emit_values(self, found: dict[Ref, tuple[list[str], bool]]) -> None:
        for ref, (values, negated) in found.items():
            col = self.sql_of(ref)
            if len(values) == 1:
                self.plan.filters.append(f"{col} {'<>' if negated else '='} {quote_literal(values[0])}")
            else:
                listed = ", ".join(quote_literal(v) for v in values)
                self.plan.filters.append(f"{col} {'NOT IN' if negated else 'IN'} ({listed})")
            shown = " or ".join(repr(v) for v in values)
            self.plan.notes.append(f"{ref.column.name} {'is not' if negated else 'is'} {shown}")

    def _date_filters(self) -> None:
        for r in self.found.date_ranges:
            ref = self.date_column(r.hint)
            col = self.sql_of(ref)
            if r.lower:
                self.plan.filters.append(f"{col} >= {r.lower}")
            if r.upper:
                self.plan.filters.append(f"{col} < {r.upper}")
            self.plan.notes.append(f"{ref.column.name} {r.note}")

    def _names_rows(self, start: int) -> int | None:
        """The end of the primary table's name at `start` (`10 conversations`), used or not."""
        k = start
        while k < len(self.q.tokens) and self.q.tokens[k].stem in FILLER and not self.q.tokens[k].used:
            k += 1
        if k < len(self.q.tokens) and self.q.tokens[k].stem == self.table.head:
            return k + 1
        return None

    def _comparisons(self) -> None:
        for c in self.found.comparisons:
            rows_end = self._names_rows(c.end)
            if rows_end is not None:
                # "with more than 10 conversations": a condition on the number of rows per group.
                self.q.use(c.end, rows_end)
                if not any(a.func == "count" and a.ref is None for a in self.plan.aggregates):
                    self._add_aggregate(PlannedAggregate("count"))
                self.plan.having.append(f"COUNT(*) {c.op} {c.number}")
                self.plan.notes.append(f"more than {c.number} rows" if c.op == ">" else f"row count {c.op} {c.number}")
                continue
            m = self.match(c.end, numeric=True)
            if m is None or m.start > c.end + 1:
                m = self.match_before(c.start, numeric=True)
            if m is None:
                raise NotUnderstood(
                    f"could not tell what {self.q.span_text(c.start, c.end)!r} compares: name a numeric column next to it"
                    f" ({', '.join(col.name for col in self.table.columns if col.kind == 'numeric' and not col.is_key)})"
                )
            self.q.use(m.start, m.end)
            self.plan.filters.append(f"{self.sql_of(m.ref)} {c.op} {c.number}")
            self.plan.notes.append(f"{m.ref.column.name} {c.op} {c.number}")

    # -- aggregates, groups, order ------------------------------------------------------------

    def _add_aggregate(self, agg: PlannedAggregate, start: int | None = None) -> int:
        self.plan.aggregates.append(agg)
        index = len(self.plan.aggregates) - 1
        if start is not None:
            self._agg_index[start] = index
        return index

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
            if agg.func != "count" and measure is not None and self.value_at(self.words_at(agg.pos)[0] if self.words_at(agg.pos) else agg.pos):
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
        for ref in [Ref(c) for c in self.table.columns] + [Ref(c, via=fk) for fk, o in self.neighbours for c in o.columns]:
            if ref.column.kind == "temporal" and hint in ref.column.core:
                if ref.column.nullable:
                    self.plan.filters.append(f"{self.sql_of(ref)} IS NOT NULL")
                    self.plan.notes.append(f"{ref.column.name} is set")
                return

    def _having_group(self) -> None:
        if self.plan.having and not self.plan.groups:
            subject = self._unused_group_column()
            if subject is None:
                raise NotUnderstood("a condition on a number of rows needs something to group by (e.g. 'agents with more than 100 conversations')")
            self._add_group(subject)

    def _group_by_time(self, unit: str) -> None:
        hints = [r.hint for r in self.found.date_ranges if r.hint]
        ref = self.date_column(hints[0] if hints else None)
        self.plan.groups.append(Group(f"date_trunc('{unit}', {self.sql_of(ref)})", unit, f"{unit} of {ref.column.name}", True))

    def _temporal(self, ref: Ref, keyword: str) -> None:
        """`by date`: with an aggregate, one group per day; otherwise newest first."""
        if self.plan.aggregates and (keyword != "by" or (not self.found.by_date and self.found.limit is None)):
            self.plan.groups.append(Group(f"date_trunc('day', {self.sql_of(ref)})", "day", f"day of {ref.column.name}", True))
            return
        self._order_by(ref, True if self.found.descending is None else self.found.descending)

    def _order_by(self, ref: Ref, descending: bool) -> None:
        self.plan.order.append(Order("col", descending, self.sql_of(ref), nulls_last=ref.column.nullable, note=ref.column.name))

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
            self.plan.order.append(Order("agg", True if self.found.descending is None else self.found.descending, agg=index))
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
