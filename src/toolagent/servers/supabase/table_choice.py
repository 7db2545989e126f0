"""First pass, second half: the table a question is about, once `phrases.scan` has marked its
table-independent phrases: the first table it names, else the one whose columns and values it
mentions most (or a table referencing that one, when only it has what the question needs).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .catalog import GENERIC_HEADS, Catalog, Table
from .phrases import Phrases
from .question import FILLER, NotUnderstood, Question, value_words


def _reserved_after(q: Question, catalog: Catalog, starts: Iterable[int], *, whole: bool) -> set[int]:
    """Tokens after each phrase start up to the first naming a table or column (`whole`: the
    next three): they name what to group by or add, not what the question is about."""
    heads = {t.head for t in catalog.tables.values()}
    cores = {w for t in catalog.tables.values() for c in t.columns for w in c.core}
    reserved: set[int] = set()
    for s in starts:
        for k in q.unused(s, 3):
            reserved.add(k)
            if not whole and q.tokens[k].stem in heads | cores:
                break
    return reserved


def _value_spans(q: Question, catalog: Catalog) -> set[int]:
    spans: set[int] = set()
    toks = q.tokens
    for values in catalog.values.values():
        for v in values:
            words = value_words(v)
            if len(words) < 2:
                continue
            for i in range(len(toks) - len(words) + 1):
                if all(not t.used and t.stem == w for t, w in zip(toks[i : i + len(words)], words)):
                    spans.update(range(i, i + len(words)))
    return spans


def mentions(q: Question, catalog: Catalog, skip: set[int]) -> list[tuple[int, int, Table]]:
    """Where tables are named: their full name (`kpi data`) or head word (`conversations`)."""
    toks, out = q.tokens, []
    for i in range(len(toks)):
        if toks[i].used or i in skip:
            continue
        for table in catalog.tables.values():
            n = len(table.words)
            window = toks[i : i + n]
            if n > 1 and len(window) == n and all(not t.used and t.stem == w for t, w in zip(window, table.words)):
                out.append((i, i + n, table))
                break
        else:
            for table in catalog.tables.values():
                if toks[i].stem == table.head and table.head not in GENERIC_HEADS:
                    out.append((i, i + 1, table))
                    break
    return out


def outside_mentions(q: Question, catalog: Catalog, outside: Catalog | None) -> NotUnderstood | None:
    """An error naming a table the question needs but may not use, or None."""
    if outside is None:
        return None
    names = [t.name for _, _, t in mentions(q, outside, set()) if t.name not in catalog.tables]
    words = {tok.stem for tok in q.tokens if not tok.used}
    for table in outside.tables.values():
        if table.name not in catalog.tables and any(
            not c.is_key
            and c.core
            and all(w in words for w in c.core)
            and not any(c.core == own.core for t in catalog.tables.values() for own in t.columns)
            for c in table.columns
        ):
            names.append(table.name)
    if not names:
        return None
    allowed = ", ".join(sorted(catalog.tables)) or "none"
    return NotUnderstood(f"the question needs table {names[0]!r}, which is not among the tables it may use ({allowed})")


def _score(q: Question, catalog: Catalog, table: Table, skip: set[int], value_spans: set[int]) -> int:
    score = 0
    for i, tok in enumerate(q.tokens):
        if tok.used or tok.kind != "word" or tok.stem in FILLER or i in skip or i in value_spans:
            continue
        if any(tok.stem in c.core for c in table.columns if not c.is_key):
            score += 3
        elif any(
            value_words(v) == (tok.stem,) for c in table.columns for v in catalog.values.get((table.name, c.name), ())
        ):
            score += 2
        elif tok.stem in table.words[:-1]:
            score += 1
    for (name, _), values in catalog.values.items():
        if name == table.name and any(len(w := value_words(v)) > 1 and _has_phrase(q, w) for v in values):
            score += 2
    return score


def _has_phrase(q: Question, words: tuple[str, ...]) -> bool:
    toks = q.tokens
    return any(
        all(t.stem == w for t, w in zip(toks[i : i + len(words)], words)) for i in range(len(toks) - len(words) + 1)
    )


def _fact_table(catalog: Catalog, table: Table, found: Phrases) -> Table | None:
    """A table referencing `table` that has what the question needs and `table` lacks.

    `average nps in 2026` names a metric (a row of kpi_metrics) but needs a date and a number,
    which live in kpi_data, the one table that references kpi_metrics.
    """
    needs_number = any(a.func in ("avg", "sum", "min", "max") for a in found.aggregates)
    has_number = any(c.kind == "numeric" and not c.is_key for c in table.columns)
    if not (found.needs_date and table.main_date is None) and not (needs_number and not has_number):
        return None
    candidates = [
        t
        for t in catalog.tables.values()
        if any(other.name == table.name for _, other in catalog.outgoing(t))
        and (t.main_date is not None or not found.needs_date)
        and (any(c.kind == "numeric" and not c.is_key for c in t.columns) or not needs_number)
    ]
    return candidates[0] if len(candidates) == 1 else None


@dataclass(frozen=True)
class Choice:
    """The table a question is about and how it was found."""

    table: Table
    via_value: bool = False
    """Reached from a value of a table it references (`average nps` -> kpi_data)."""
    mention: tuple[int, int] | None = None
    """The tokens that name the table, when it is named."""


def choose_table(q: Question, found: Phrases, catalog: Catalog, outside: Catalog | None) -> Choice:
    """The table the question is about; uses the words that name it.

    Raises:
        NotUnderstood: no table, or more than one equally likely.
    """
    if not catalog.tables:
        raise NotUnderstood("no tables are available to answer from")
    skip = _reserved_after(q, catalog, [s for _, s in found.by_phrases], whole=False)
    skip |= _reserved_after(q, catalog, [s for _, s in found.with_phrases], whole=True)
    found.value_spans = _value_spans(q, catalog)
    named = mentions(q, catalog, skip | found.value_spans)
    if named:
        start, end, table = named[0]
        q.use(start, end)
        if start > 0 and q.tokens[start - 1].kind == "number" and not q.tokens[start - 1].used and found.limit is None:
            found.limit = int(float(q.tokens[start - 1].value))  # "show 20 users"
            q.use(start - 1, start)
        return Choice(table, mention=(start, end))
    scores = {name: _score(q, catalog, table, skip, found.value_spans) for name, table in catalog.tables.items()}
    best = max(scores.values())
    winners = sorted(n for n, s in scores.items() if s == best)
    if best > 0 and len(winners) > 1:
        # A tie between a table and one it references: the referencing (fact) table.
        referencing = [
            n for n in winners if any(other.name in winners for _, other in catalog.outgoing(catalog.tables[n]))
        ]
        winners = referencing if len(referencing) == 1 else winners
    if best > 0 and len(winners) == 1:
        table = catalog.tables[winners[0]]
        fact = _fact_table(catalog, table, found)
        return Choice(fact, via_value=True) if fact is not None else Choice(table)
    if len(catalog.tables) == 1:
        return Choice(next(iter(catalog.tables.values())))
    if best > 0:
        raise NotUnderstood(
            f"the question does not say which table it is about: it could be {' or '.join(winners)}; name the table"
        )
    error = outside_mentions(q, catalog, outside)
    if error is not None:
        raise error
    names = ", ".join(sorted(catalog.tables))
    raise NotUnderstood(
        f"could not tell which table {q.original!r} is about: no word names a table, a column or a value in the data"
        f" (tables: {names})"
    )


__all__ = ["Choice", "choose_table", "mentions", "outside_mentions"]
