"""Tables that fit the terminal without cutting what people copy: ids and tool names.

Rich shrinks every column of a table wider than the terminal, ids included (`run_179…`). Here
the columns marked `keep` always get the width of their longest value, on one line; the other
columns share what is left and wrap; and when even that does not fit, the columns marked
`drop` leave the table, the least important first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rich import box
from rich.console import JustifyMethod
from rich.table import Table
from rich.text import Text

#: Narrowest a wrapping column gets before columns are dropped instead.
MIN_WRAP_WIDTH = 6
#: A wrapping column is kept at least as wide as its longest word, up to this many characters.
MAX_WORD_WIDTH = 12


@dataclass(frozen=True)
class Column:
    """One column of a fitted table."""

    header: str
    #: An id or a tool name: shown whole, on one line, whatever the terminal's width.
    keep: bool = False
    #: 0 = always shown; otherwise dropped when the table does not fit, 1 first, then 2, ...
    drop: int = 0
    justify: JustifyMethod = "left"


def _cell_width(cell: str, markup: bool) -> int:
    text = Text.from_markup(cell) if markup else Text(cell)
    return max((Text(line).cell_len for line in text.plain.split("\n")), default=0)


def _longest_word(cell: str, markup: bool) -> int:
    text = Text.from_markup(cell).plain if markup else cell
    return max((len(word) for word in text.split()), default=0)


def _overhead(columns: int) -> int:
    # Between two columns: a space of padding on each side and the (blank) separator.
    return 3 * max(columns - 1, 0)


def fitted_table(columns: Sequence[Column], rows: Sequence[Sequence[str]], width: int, *, markup: bool = True) -> Table:
    """A table of `rows` no wider than `width` that never cuts a `keep` column.

    Args:
        columns: the columns, in display order.
        rows: one sequence of cells per row, in the order of `columns`.
        width: the terminal's width.
        markup: whether cells hold rich markup.

    Returns:
        A rich Table with fixed column widths.
    """
    natural = [max([len(c.header), *(_cell_width(str(r[i]), markup) for r in rows)]) for i, c in enumerate(columns)]
    shown = list(range(len(columns)))

    words = [
        max([_longest_word(c.header, False), *(_longest_word(str(r[i]), markup) for r in rows)])
        for i, c in enumerate(columns)
    ]

    def minimum(i: int) -> int:
        if columns[i].keep:
            return natural[i]
        return min(natural[i], max(MIN_WRAP_WIDTH, min(words[i], MAX_WORD_WIDTH)))

    while sum(minimum(i) for i in shown) + _overhead(len(shown)) > width:
        droppable = [i for i in shown if columns[i].drop]
        if not droppable:
            break
        shown.remove(min(droppable, key=lambda i: (columns[i].drop, -i)))
    widths = {i: minimum(i) for i in shown}
    spare = width - _overhead(len(shown)) - sum(widths.values())
    # Share what is left among the wrapping columns, the ones that need most first.
    while spare > 0:
        wanting = [i for i in shown if widths[i] < natural[i]]
        if not wanting:
            break
        i = max(wanting, key=lambda j: natural[j] - widths[j])
        widths[i] += 1
        spare -= 1
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i in shown:
        column = columns[i]
        table.add_column(
            column.header,
            width=widths[i],
            justify=column.justify,
            no_wrap=column.keep,
            overflow="fold",
        )
    for row in rows:
        table.add_row(*(row[i] if markup else Text(str(row[i])) for i in shown))
    return table


def time_cell(value: datetime | None) -> str:
    """A time in a table cell: UTC, a space (not ISO's `T`) between date and time, so a narrow table
    wraps the time under the date; empty for None."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value is not None else ""


__all__ = ["Column", "fitted_table", "time_cell"]
