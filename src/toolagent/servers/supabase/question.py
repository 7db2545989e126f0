"""Tokens of a natural-language question, and the bookkeeping of which ones are understood.

`Question` keeps the tokens (quoted strings, emails, dates, numbers, operators, words) and a
`used` flag per token. Structural phrases are found with regular expressions over `text()`,
where every used token shows as `_`, so no phrase spans something already understood;
`find` maps a match back to token positions.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .catalog import stem


class NotUnderstood(ValueError):
    """The question cannot be turned into SQL; the message says which part and why."""


_RESERVED = frozenset(
    """all analyse analyze and any array as asc asymmetric both case cast check collate column constraint
    create current_date current_time current_timestamp current_user default deferrable desc distinct do else
    end except false fetch for foreign from grant group having in initially intersect into lateral leading
    limit localtime localtimestamp not null offset on only or order placing primary references returning
    select session_user some symmetric table then to trailing true union unique user using variadic when
    where window with""".split()
)


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, quoted only when it has to be."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_literal(value: str) -> str:
    """A standard SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def value_words(value: str) -> tuple[str, ...]:
    """Stems of the words of a data value (`monthly_active_users` -> monthly, activ, user)."""
    return tuple(stem(w) for w in re.findall(r"[a-z0-9]+", value.lower()))


def number_text(text: str) -> str:
    """A number as SQL text: `50.0` -> `50`."""
    return str(int(float(text))) if float(text).is_integer() else str(float(text))


_TOKEN = re.compile(
    r"""
    (?P<quoted>'(?:[^']|'')*'|"[^"]*")
  | (?P<email>[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)
  | (?P<date>\d{4}-\d{2}-\d{2})
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<op>>=|<=|<>|!=|>|<|=)
  | (?P<word>[A-Za-z][A-Za-z0-9']*)
    """,
    re.VERBOSE,
)

#: Words that carry no meaning of their own in these questions.
FILLER = frozenset(
    stem(w)
    for w in """
    a an the of for with in on by per from to at and or as than that this these those there
    show list give get find display return fetch see tell view want need please can could would
    should will me us i we you my our your their its his her them they it one ones
    what which who whom whose where when how is are was were be been being do does did have has had
    all any every each some only just also both currently ever so far overall
    row rows record records entry entries result results item items table tables data
    have having whose that's what's there's been among across up out list
    """.split()
)


@dataclass
class Token:
    """One token; `text` is what regexes see (lower case), `value` the original text."""

    kind: str
    text: str
    value: str
    stem: str
    used: bool = False


@dataclass(frozen=True)
class Found:
    """A regex match over `Question.text()`, with the token span it covers."""

    match: re.Match[str]
    start: int
    end: int

    def group(self, n: int | str) -> str | None:
        """A group of the match."""
        return self.match.group(n)


class Question:
    """The tokens of one question and which of them have been understood."""

    def __init__(self, text: str) -> None:
        self.original = text.replace("\x00", "")
        self.tokens: list[Token] = []
        text = self.original
        for m in _TOKEN.finditer(text):
            kind = m.lastgroup or "word"
            raw = m.group(0)
            if kind == "quoted":
                inner = raw[1:-1].replace("''", "'") if raw[0] == "'" else raw[1:-1]
                self.tokens.append(Token("quoted", "§", inner, ""))
            elif kind == "word":
                low = raw.lower()
                if low.endswith("'s"):
                    low = low[:-2]
                for part in low.split("'"):
                    if part:
                        self.tokens.append(Token("word", part, raw, stem(part)))
            else:
                self.tokens.append(Token(kind, raw.lower(), raw, raw.lower()))

    def text(self) -> str:
        """Tokens joined by single spaces; used tokens appear as `_`."""
        return " ".join("_" if t.used else t.text for t in self.tokens)

    def _offsets(self) -> list[int]:
        offsets, pos = [], 0
        for t in self.tokens:
            offsets.append(pos)
            pos += len("_" if t.used else t.text) + 1
        return offsets

    def find(self, pattern: str) -> Iterator[Found]:
        """Matches of `pattern` over whole tokens, first to last, skipping those overlapping used tokens.

        The pattern is wrapped so that it starts and ends at token boundaries.
        """
        regex = re.compile(rf"(?<!\S)(?:{pattern})(?!\S)")
        next_token = 0
        while next_token < len(self.tokens):
            # Recomputed each time: the caller may have used tokens since the last match.
            text, offsets = self.text(), self._offsets()
            m = regex.search(text, offsets[next_token])
            if m is None or m.end() == m.start():
                return
            start = max(i for i, o in enumerate(offsets) if o <= m.start())
            end = max(i for i, o in enumerate(offsets) if o < m.end()) + 1
            yield Found(m, start, end)
            next_token = end

    def first(self, pattern: str) -> Found | None:
        """The first match of `pattern`, or None."""
        return next(self.find(pattern), None)

    def use(self, start: int, end: int) -> None:
        """Mark tokens [start, end) as understood."""
        for t in self.tokens[start:end]:
            t.used = True

    def unused(self, start: int = 0, limit: int | None = None) -> list[int]:
        """Positions of unused tokens from `start` on, stopping at the first used one."""
        out: list[int] = []
        for i in range(start, len(self.tokens)):
            if self.tokens[i].used or (limit is not None and len(out) >= limit):
                break
            out.append(i)
        return out

    def leftovers(self) -> list[Token]:
        """Unused tokens that are not filler words."""
        return [t for t in self.tokens if not t.used and not (t.kind == "word" and t.stem in FILLER)]

    def span_text(self, start: int, end: int) -> str:
        """The words of tokens [start, end) as written."""
        return " ".join(repr(t.value) if t.kind == "quoted" else t.text for t in self.tokens[start:end])
