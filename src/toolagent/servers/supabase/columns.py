"""Column phrases: words of a question matched to columns of a table and the tables it references.

`ColumnPhrases` knows the question, the chosen (primary) table and the tables its foreign
keys reference. `match(start)` finds the longest phrase at a token naming a column
(`message count`), a referenced table (`user`: users, through user_id, shown by its label
column) or a column of one (`user email`, `metric name`); `value_at(i)` finds a value seen in
the data (`failed`, `monthly active users`). Column SQL is written with `QUALIFIER` marks so
the builder can drop `table.` prefixes when nothing is joined.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import GENERIC_HEADS, Catalog, Column, Table
from .phrases import Phrases
from .question import FILLER, NotUnderstood, Question, quote_ident, value_words

#: Marks a table qualifier in generated SQL; rendered as `table.` only when the query joins.
QUALIFIER = "\x00"


@dataclass(frozen=True)
class Ref:
    """A column, of the primary table or reached through the primary table's foreign key `via`."""

    column: Column
    via: Column | None = None


@dataclass(frozen=True)
class Match:
    """Words that name a column; `entity` is set when they name a whole referenced table."""

    ref: Ref
    start: int
    end: int
    entity: Table | None = None


class ColumnPhrases:
    """Matches words of a question against a table, its columns and what it references."""

    def __init__(self, q: Question, found: Phrases, catalog: Catalog, table: Table) -> None:
        self.q = q
        self.found = found
        self.catalog = catalog
        self.table = table
        self.neighbours = catalog.outgoing(table)
        #: Referenced tables used so far, by name, with the foreign key that reaches them.
        self.joins: dict[str, Column] = {}
        self._value_phrases: list[tuple[tuple[str, ...], Ref, str]] | None = None
        #: Whether a date phrase or time grouping took the question's temporal verb.
        self.time_hint_used = False

    def words_at(self, start: int, limit: int = 6) -> list[int]:
        """Unused token positions from `start`, without leading filler."""
        positions = self.q.unused(start, limit)
        while len(positions) > 1 and self.q.tokens[positions[0]].stem in FILLER:
            positions = positions[1:]
        return positions

    def match(self, start: int, *, numeric: bool = False) -> Match | None:
        """The longest column phrase starting at `start` (after filler), or None."""
        pos = self.words_at(start)
        if not pos:
            return None
        toks = self.q.tokens
        stems = [toks[k].stem for k in pos]
        lead = 0  # leading words of the table's own name (`kpi value`, `conversation title`)
        while lead < len(stems) - 1 and stems[lead] in self.table.words:
            lead += 1
        best: tuple[tuple[int, int], Match] | None = None

        def offer(skip: int, length: int, rank: int, ref: Ref, entity: Table | None = None) -> None:
            nonlocal best
            if numeric and (entity is not None or ref.column.kind != "numeric" or ref.column.is_key):
                return
            key = (skip + length, -rank)
            if best is None or key > best[0]:
                best = (key, Match(ref, pos[0], pos[skip + length - 1] + 1, entity))

        for skip in sorted({0, lead}):
            rest = stems[skip:]
            for c in self.table.columns:
                for words, rank in ((c.words, 0), (c.core, 1)):
                    if rest[: len(words)] == list(words):
                        entity = self.entity_of(c) if c.references is not None and words == c.core else None
                        offer(skip, len(words), rank, Ref(entity.label, via=c) if entity else Ref(c), entity)
                if len(c.core) > 1 and rest and rest[0] in (c.core[0], c.core[-1]) and self._unique_part(rest[0]):
                    offer(skip, 1, 5, Ref(c))
            for fk, other in self.neighbours:
                names = {other.words} if other.head in GENERIC_HEADS else {other.words, (other.head,)}
                for words in names:
                    if rest[: len(words)] != list(words):
                        continue
                    after = rest[len(words) :]
                    offer(skip, len(words), 2, Ref(other.label, via=fk), other)
                    for c in other.columns:
                        for cw in (c.words, c.core):
                            if after[: len(cw)] == list(cw):
                                offer(skip, len(words) + len(cw), 2, Ref(c, via=fk))
                        if after and len(c.core) > 1 and after[0] == c.core[-1]:
                            offer(skip, len(words) + 1, 3, Ref(c, via=fk))
                for c in other.columns:
                    if not c.is_key and rest[: len(c.core)] == list(c.core) and not self._own_core(c.core):
                        offer(skip, len(c.core), 4, Ref(c, via=fk))
        if best is None:
            return None
        m = best[1]
        # A timestamp column may be followed by "date" or "time" (`start date`).
        if (
            m.ref.column.kind == "temporal"
            and m.end < len(toks)
            and not toks[m.end].used
            and toks[m.end].stem in ("dat", "time")
        ):
            m = Match(m.ref, m.start, m.end + 1, m.entity)
        return m

    def _own_core(self, core: tuple[str, ...]) -> bool:
        return any(c.core == core for c in self.table.columns)

    def _unique_part(self, word: str) -> bool:
        return sum(1 for c in self.table.columns if word in c.core) == 1

    def entity_of(self, fk: Column) -> Table | None:
        """The referenced table a foreign key column of the primary table leads to."""
        return next((t for c, t in self.neighbours if c.name == fk.name), None)

    def sql_of(self, ref: Ref) -> str:
        """The column's SQL (joining its table when it is reached through a foreign key)."""
        if ref.via is not None:
            self.joins[ref.column.table] = ref.via
        return f"{QUALIFIER}{quote_ident(ref.column.table)}{QUALIFIER}{quote_ident(ref.column.name)}"

    def sql_of_column(self, column: Column) -> str:
        """SQL of a column of the primary table."""
        return self.sql_of(Ref(column))

    def is_temporal(self, name: str) -> bool:
        """True when a column of that name in the primary or a referenced table is a timestamp."""
        tables = [self.table, *(other for _, other in self.neighbours)]
        return any(c.name == name and c.kind == "temporal" for t in tables for c in t.columns)

    def alias(self, ref: Ref) -> str:
        """A result column name: the column's own, prefixed for referenced tables (`user_email`)."""
        if ref.via is None:
            return ref.column.name
        prefix = "_".join(ref.via.core)
        return ref.column.name if ref.column.name.startswith(prefix) else f"{prefix}_{ref.column.name}"

    def date_column(self, hint: str | None) -> Ref:
        """The timestamp a date phrase is about: the hinted one (`created` -> created_at), else
        the question's temporal verb, else the table's main date.

        Raises:
            NotUnderstood: the table has no timestamp column.
        """
        if hint is None and self.found.time_hint is not None:
            hint = self.found.time_hint
            self.time_hint_used = True
        if hint is not None:
            for c in self.table.columns:
                if c.kind == "temporal" and hint in c.core:
                    return Ref(c)
            for fk, other in self.neighbours:
                for c in other.columns:
                    if c.kind == "temporal" and hint in c.core:
                        return Ref(c, via=fk)
        main = self.table.main_date
        if main is None:
            raise NotUnderstood(f"table {self.table.name} has no date or timestamp column to filter or group by time")
        return Ref(main)

    def single_measure(self) -> Column | None:
        """The primary table's only numeric non-key column, if it has exactly one."""
        numeric = [c for c in self.table.columns if c.kind == "numeric" and not c.is_key]
        return numeric[0] if len(numeric) == 1 else None

    def email_column(self) -> Ref | None:
        """An email column of the primary table, else of a referenced one."""
        for c in self.table.columns:
            if "email" in c.core:
                return Ref(c)
        for fk, other in self.neighbours:
            for c in other.columns:
                if "email" in c.core:
                    return Ref(c, via=fk)
        return None

    def categories(self) -> list[tuple[Ref, tuple[str, ...]]]:
        """Columns with known values: the primary table's, then referenced tables'."""
        values = self.catalog.values
        out = [
            (Ref(c), values[(self.table.name, c.name)])
            for c in self.table.columns
            if (self.table.name, c.name) in values
        ]
        for fk, other in self.neighbours:
            out += [
                (Ref(c, via=fk), values[(other.name, c.name)]) for c in other.columns if (other.name, c.name) in values
            ]
        return out

    def value_at(self, i: int) -> tuple[int, Ref, str] | None:
        """The longest data value starting at token i: (end, column, value)."""
        toks = self.q.tokens
        if self._value_phrases is None:
            phrases = [(value_words(v), ref, v) for ref, values in self.categories() for v in values]
            # Longest first; then the primary table's own columns before referenced ones.
            phrases.sort(key=lambda p: (-len(p[0]), p[1].via is not None))
            self._value_phrases = phrases
        for words, ref, value in self._value_phrases:
            window = toks[i : i + len(words)]
            if (
                0 < len(words) <= 4
                and len(window) == len(words)
                and all(not t.used and t.stem == w for t, w in zip(window, words))
            ):
                return i + len(words), ref, value
        return None

    def match_before(self, end: int, *, numeric: bool = False) -> Match | None:
        """A column phrase ending just before `end` (filler aside): `message count above 5`."""
        k = end
        while k > 0 and not self.q.tokens[k - 1].used and self.q.tokens[k - 1].stem in FILLER:
            k -= 1
        for s in range(max(0, k - 4), k):
            m = self.match(s, numeric=numeric)
            if m is not None and m.start == s and m.end == k:
                return m
        return None

    def use_table_words(self, start: int) -> None:
        """Mark the primary table's own name words (and filler) from `start` as understood."""
        for k in self.q.unused(start, 3):
            if self.q.tokens[k].stem not in self.table.words and self.q.tokens[k].stem not in FILLER:
                break
            self.q.use(k, k + 1)
