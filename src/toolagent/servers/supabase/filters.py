"""Second pass, filters: quoted values, emails and ids, values next to their column's name or seen
in the data, date ranges and numeric comparisons, each placed as a WHERE (or HAVING) condition of
the plan. `resolver.Resolver` builds on this with aggregates, groups, ordering and leftovers.
"""

from __future__ import annotations

from .catalog import Catalog, Column, Table
from .columns import ColumnPhrases, Match, Ref
from .phrases import Phrases
from .plan import Plan, PlannedAggregate
from .question import FILLER, NotUnderstood, Question, number_text, quote_literal

_NEGATIONS = frozenset({"not", "non", "excluding", "except", "without"})
_QUOTE_LEADS = {
    "is": "=", "equals": "=", "named": "=", "called": "=", "titled": "=", "of": "=", "with": "=", "as": "=",
    "like": "contains", "containing": "contains", "contains": "contains", "matching": "contains",
    "mentioning": "contains", "starting": "starts", "starts": "starts", "ending": "ends", "ends": "ends",
}  # fmt: skip


class FilterPhrases(ColumnPhrases):
    """Places the question's filters against the primary table and its references, into `plan`."""

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

    def _add_aggregate(self, agg: PlannedAggregate, start: int | None = None) -> int:
        self.plan.aggregates.append(agg)
        index = len(self.plan.aggregates) - 1
        if start is not None:
            self._agg_index[start] = index
        return index

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
                        if c.references is not None and (
                            c.core == (toks[k].stem,) or (other and other.head == toks[k].stem)
                        ):
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


__all__ = ["FilterPhrases"]
