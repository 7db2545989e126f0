"""First pass over a question: the phrases that do not depend on the table, then the table.

`scan` finds date ranges, limits and ordering words, comparisons, aggregate words, grouping
(`by`, `per`, `monthly`) and `with` phrases, and marks their keywords as understood.
`table_choice.choose_table` then picks the table the question is about.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass, field
from datetime import date, timedelta

from .catalog import Catalog
from .question import FILLER, Question, number_text, quote_literal, value_words

_AGGREGATE_WORDS = [
    (r"(?:average|avg|mean)(?: (?:number|count) of)?", "avg"),
    (r"(?:maximum|max)(?: (?:number|count) of)?", "max"),
    (r"(?:minimum|min)(?: (?:number|count) of)?", "min"),
    (r"(?:sum of|sum|total)(?: (?:number|count) of)?", "sum"),
]
_COUNT_WORDS = r"how many|number of|counts? of|counts?|amount of|tally of"
_DISTINCT_WORDS = r"distinct|unique|different"
_COMPARISONS = [
    (r"more than|greater than|over|above|exceeding|larger than|higher than|longer than|>", ">"),
    (r"at least|no fewer than|no less than|>=", ">="),
    (r"fewer than|less than|under|below|smaller than|lower than|shorter than|<", "<"),
    (r"at most|no more than|<=", "<="),
    (r"exactly|equal to|equals|=", "="),
]
SUPERLATIVE_DESC = r"most|highest|largest|biggest|longest|greatest"
SUPERLATIVE_ASC = r"fewest|least|lowest|smallest|shortest"
#: Time buckets: the nouns (`per month`) and adjectives (`monthly`), mapped to date_trunc units.
BUCKETS = {"day": "day", "daily": "day", "week": "week", "weekly": "week", "month": "month", "monthly": "month",
           "quarter": "quarter", "quarterly": "quarter", "year": "year", "yearly": "year", "annual": "year",
           "annually": "year"}  # fmt: skip
TIME_NOUNS = frozenset(unit for word, unit in BUCKETS.items() if word == unit)
_UNITS = r"days?|weeks?|months?|years?|hours?"
_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name} | {
    name.lower(): i for i, name in enumerate(calendar.month_abbr) if name
}
_BE = frozenset({"was", "were", "is", "are", "be", "been", "get", "got"})


@dataclass
class Aggregate:
    """An aggregate word: its function, where its keyword starts and where its operand starts."""

    func: str
    start: int
    pos: int
    distinct: bool = False


@dataclass(frozen=True)
class DateRange:
    """A date condition: SQL bounds (either may be empty), a note, and a column hint stem."""

    lower: str
    upper: str
    note: str
    hint: str | None


@dataclass(frozen=True)
class Comparison:
    """`more than 50`: the operator, the number and the token span of the phrase."""

    op: str
    number: str
    start: int
    end: int


@dataclass
class Phrases:
    """What `scan` found."""

    limit: int | None = None
    descending: bool | None = None
    by_date: bool = False
    order_phrase: int | None = None
    topn_subject: int | None = None
    superlative: tuple[bool, int] | None = None
    date_ranges: list[DateRange] = field(default_factory=list)
    aggregates: list[Aggregate] = field(default_factory=list)
    by_phrases: list[tuple[str, int]] = field(default_factory=list)
    with_phrases: list[tuple[str, int]] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    bucket: str | None = None
    time_group: bool = False
    time_hint: str | None = None
    """A temporal verb anywhere (`signed up`, `ended`): which timestamp the question means."""
    value_spans: set[int] = field(default_factory=set)

    @property
    def needs_date(self) -> bool:
        """True when the question filters or groups by time."""
        return bool(self.date_ranges) or self.bucket is not None or self.time_group


class _Scanner:
    def __init__(self, q: Question, catalog: Catalog) -> None:
        self.q = q
        self.catalog = catalog
        self.found = Phrases()
        self.hidden: set[int] = set()

    def run(self) -> Phrases:
        self._hide_names()
        self._dates()
        self._time_verbs()
        self._ordering()
        self._comparisons()
        self._aggregates()
        self._groups()
        for k in self.hidden:
            self.q.tokens[k].used = False
        return self.found

    def _hide_names(self) -> None:
        """Hide multi-word column names (`message count`) and values (`monthly active users`)
        from the keyword patterns, so `count` or `monthly` inside them is not read as a keyword."""
        tables = self.catalog.tables.values()
        names = {c.core for t in tables for c in t.columns if len(c.core) > 1}
        names |= {c.words for t in tables for c in t.columns if len(c.words) > 1}
        names |= {w for vs in self.catalog.values.values() for v in vs if len(w := value_words(v)) > 1}
        toks = self.q.tokens
        for i in range(len(toks)):
            for words in names:
                j = i + len(words)
                if j <= len(toks) and all(t.stem == w for t, w in zip(toks[i:j], words)):
                    self.hidden.update(range(i, j))
        for k in self.hidden:
            toks[k].used = True

    def _hint(self, start: int) -> str | None:
        """A temporal verb just before a date phrase (`created in 2026`, `signed up this year`)."""
        toks, k = self.q.tokens, start - 1
        while k >= 0 and (toks[k].stem in _BE or toks[k].text == "up") and (k in self.hidden or not toks[k].used):
            k -= 1
        if k < 0 or (toks[k].used and k not in self.hidden) or toks[k].kind != "word":
            return None
        word = toks[k].stem
        temporal = {w for t in self.catalog.tables.values() for c in t.columns if c.kind == "temporal" for w in c.core}
        if word not in temporal:
            return None
        self.hidden.discard(k)
        self.q.use(k, start)
        return word

    def _time_verbs(self) -> None:
        """`users who signed up per month`: a temporal verb not next to a date phrase."""
        toks = self.q.tokens
        temporal = {w for t in self.catalog.tables.values() for c in t.columns if c.kind == "temporal" for w in c.core}
        for i, tok in enumerate(toks):
            if not tok.used and tok.kind == "word" and tok.stem in temporal and tok.stem not in FILLER:
                end = i + 2 if i + 1 < len(toks) and toks[i + 1].text == "up" and not toks[i + 1].used else i + 1
                self.q.use(i, end)
                self.found.time_hint = self.found.time_hint or tok.stem

    def _add(self, start: int, end: int, lower: str, upper: str, note: str) -> None:
        self.q.use(start, end)
        self.found.date_ranges.append(DateRange(lower, upper, note, self._hint(start)))

    def _dates(self) -> None:
        q = self.q
        pre = r"(?:(?:in|during|over|within|from|for) )?(?:the )?"
        for f in list(q.find(rf"{pre}(?:last|past|previous) (\d+) ({_UNITS})")):
            n, unit = int(f.group(1) or 0), (f.group(2) or "").rstrip("s")
            self._add(f.start, f.end, f"now() - INTERVAL '{n} {unit}{'s' if n != 1 else ''}'", "",
                      f"in the last {n} {unit}{'s' if n != 1 else ''}")  # fmt: skip
        for f in list(q.find(rf"{pre}past (day|week|month|year)")):
            unit = f.group(1) or "day"
            self._add(f.start, f.end, f"now() - INTERVAL '1 {unit}'", "", f"in the past {unit}")
        for f in list(q.find(rf"{pre}(?:last|previous) (day|week|month|quarter|year)")):
            unit = f.group(1) or "month"
            start = f"date_trunc('{unit}', now())"
            step = "3 months" if unit == "quarter" else f"1 {unit}"
            self._add(f.start, f.end, f"{start} - INTERVAL '{step}'", start, f"in the previous calendar {unit}")
        for f in list(q.find(rf"{pre}(?:this|current) (day|week|month|quarter|year)|{pre}(year to date|ytd)")):
            unit = f.group(1) or "year"
            start = f"date_trunc('{unit}', now())"
            step = "3 months" if unit == "quarter" else f"1 {unit}"
            self._add(f.start, f.end, start, f"{start} + INTERVAL '{step}'", f"in the current {unit}")
        for f in list(q.find(r"(?:(?:in|on|for) )?(today|yesterday)")):
            day = "date_trunc('day', now())"
            if f.group(1) == "today":
                self._add(f.start, f.end, day, f"{day} + INTERVAL '1 day'", "today")
            else:
                self._add(f.start, f.end, f"{day} - INTERVAL '1 day'", day, "yesterday")
        months = "|".join(sorted(_MONTHS, key=len, reverse=True))
        for f in list(q.find(rf"(?:(?:in|during|for) )?({months}) (?:of )?(\d{{4}})")):
            m, y = _MONTHS[f.group(1) or ""], int(f.group(2) or 0)
            first, nxt = date(y, m, 1), date(y + (m == 12), m % 12 + 1, 1)
            self._add(f.start, f.end, quote_literal(first.isoformat()), quote_literal(nxt.isoformat()),
                      f"in {calendar.month_name[m]} {y}")  # fmt: skip
        for f in list(q.find(r"(?:from |between )?(\d{4}-\d{2}-\d{2}) (?:and|to|until) (\d{4}-\d{2}-\d{2})")):
            a, b = date.fromisoformat(f.group(1) or ""), date.fromisoformat(f.group(2) or "")
            self._add(f.start, f.end, quote_literal(a.isoformat()), quote_literal((b + timedelta(days=1)).isoformat()),
                      f"from {a} to {b}")  # fmt: skip
        for f in list(q.find(r"(?:since|after|from|starting) (\d{4}-\d{2}-\d{2})")):
            self._add(f.start, f.end, quote_literal(f.group(1) or ""), "", f"since {f.group(1)}")
        for f in list(q.find(r"(?:before|until) (\d{4}-\d{2}-\d{2})")):
            self._add(f.start, f.end, "", quote_literal(f.group(1) or ""), f"before {f.group(1)}")
        for f in list(q.find(r"(?:(?:in|during|for|of) )?(?:the year )?((?:19|20)\d\d)")):
            y = int(f.group(1) or 0)
            self._add(f.start, f.end, quote_literal(f"{y}-01-01"), quote_literal(f"{y + 1}-01-01"), f"in {y}")

    def _ordering(self) -> None:
        q, found = self.q, self.found
        recent = r"most recent|latest|newest|last|recent"
        for pattern, desc, by_date in [
            (r"(?:top|first|highest|largest|biggest|best) (\d+)", True, False),
            (r"(?:bottom|lowest|smallest|least|worst) (\d+)", False, False),
            (rf"(\d+) (?:{recent})", True, True),
            (rf"(?:{recent}) (\d+)", True, True),
            (r"(\d+) (?:oldest|earliest)", False, True),
            (r"(?:oldest|earliest) (\d+)", False, True),
            (r"(?:limit(?: to)?|only|up to) (\d+)", None, False),
        ]:
            for f in list(q.find(pattern)):
                found.limit = int(f.group(1) or 0)
                if desc is not None:
                    found.descending = desc
                found.by_date |= by_date
                q.use(f.start, f.end)
                if desc is not None and not by_date:
                    found.topn_subject = f.end
        for pattern, desc in [
            (rf"(?:the )?(?:{recent})", True),
            (r"(?:the )?(?:oldest|earliest)", False),
        ]:
            for f in list(q.find(pattern)):
                found.descending, found.by_date = desc, True
                q.use(f.start, f.end)
        for pattern, desc in [
            (r"(?:newest|latest|most recent|highest|largest) first|descending|desc", True),
            (r"(?:oldest|earliest|lowest|smallest) first|ascending|asc", False),
        ]:
            for f in list(q.find(pattern)):
                found.descending = desc
                q.use(f.start, f.end)
        for f in list(q.find(r"(?:order|ordered|sort|sorted|rank|ranked|organized) by(?: the)?")):
            q.use(f.start, f.end)
            found.order_phrase = f.end
        for f in list(q.find(rf"(?:the )?({SUPERLATIVE_DESC}|{SUPERLATIVE_ASC})")):
            q.use(f.start, f.end)
            found.superlative = (bool(re.fullmatch(SUPERLATIVE_DESC, f.group(1) or "")), f.end)

    def _comparisons(self) -> None:
        for pattern, op in _COMPARISONS:
            for f in list(self.q.find(rf"(?:is |are |of |with |has |have |had )?(?:{pattern}) (\d+(?:\.\d+)?)")):
                self.q.use(f.start, f.end)
                self.found.comparisons.append(Comparison(op, number_text(f.group(1) or "0"), f.start, f.end))

    def _aggregates(self) -> None:
        q, aggs = self.q, self.found.aggregates
        for pattern, func in _AGGREGATE_WORDS:
            for f in list(q.find(rf"(?:the )?(?:{pattern})")):
                q.use(f.start, f.end)
                aggs.append(Aggregate(func, f.start, f.end))
        for f in list(q.find(rf"(?:the )?(?:total )?(?:{_COUNT_WORDS})(?: (?:the|all))?(?: ({_DISTINCT_WORDS}))?")):
            q.use(f.start, f.end)
            aggs.append(Aggregate("count", f.start, f.end, distinct=bool(f.group(1))))
        for f in list(q.find(rf"(?:the )?({_DISTINCT_WORDS})")):
            counts = [a for a in aggs if a.func == "count"]
            if counts:
                q.use(f.start, f.end)
                counts[0].distinct, counts[0].pos = True, f.end
        aggs.sort(key=lambda a: a.pos)

    def _groups(self) -> None:
        q = self.q
        for word, unit in BUCKETS.items():
            if word.endswith("ly") or word == "annual":
                for f in list(q.find(word)):
                    q.use(f.start, f.end)
                    self.found.bucket = unit
        keywords = r"grouped by|group by|broken down by|broken out by|split by|by|per|for each|for every|each"
        for f in list(q.find(rf"(?:{keywords})(?: (?:the|each|every|their))?")):
            q.use(f.start, f.end)
            self.found.by_phrases.append((f.group(0) or "", f.end))
            if f.end < len(q.tokens) and q.tokens[f.end].stem in {*BUCKETS, "dat", "time"}:
                self.found.time_group = True
        for f in list(q.find(r"(with|including|plus|showing|along with|and)(?: (?:the|their|its))?")):
            if f.end < len(q.tokens) and (not q.tokens[f.end].used or f.end in self.hidden):
                self.found.with_phrases.append((f.group(1) or "", f.end))


def scan(q: Question, catalog: Catalog) -> Phrases:
    """Find the table-independent phrases of `q` and mark their keywords as understood."""
    return _Scanner(q, catalog).run()


__all__ = [
    "BUCKETS",
    "SUPERLATIVE_ASC",
    "SUPERLATIVE_DESC",
    "TIME_NOUNS",
    "Aggregate",
    "Comparison",
    "DateRange",
    "Phrases",
    "scan",
]
