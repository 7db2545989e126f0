"""`evolve`: `dataclasses.replace` for the frozen records a tool call passes along.

A call copies its records several times on its way (the execution as admitted and as ended,
the outcome), and `dataclasses.replace` is slow for a
frozen dataclass of twenty fields: it loops over the fields to gather the arguments, then the
generated `__init__` sets each one through `object.__setattr__`. A copy of the instance's
`__dict__` with the changes applied is the same object for a dataclass whose `__init__` only
stores its fields (no `__post_init__`, no `InitVar`, no `__slots__`); for any other it falls back
to `replace`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

#: Per class: the names `evolve` may change, or None when it must use `dataclasses.replace`.
_PLAIN: dict[type, frozenset[str] | None] = {}


def _plain_fields(cls: type) -> frozenset[str] | None:
    if hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        return None
    fields = dataclasses.fields(cls)
    # `__dataclass_fields__` also holds the InitVar and ClassVar pseudo-fields, which `fields()` leaves out.
    if len(fields) != len(cls.__dataclass_fields__) or any(not f.init for f in fields):  # type: ignore[attr-defined]  # a dataclass, checked by fields()
        return None
    return frozenset(f.name for f in fields)


def evolve(record: T, /, **changes: Any) -> T:
    """A copy of the dataclass instance `record` with `changes` (what `dataclasses.replace` returns).

    Raises:
        TypeError: a name in `changes` is not one of its fields.
    """
    cls = type(record)
    try:
        names = _PLAIN[cls]
    except KeyError:
        names = _PLAIN[cls] = _plain_fields(cls)
    if names is None:
        return dataclasses.replace(record, **changes)  # type: ignore[type-var]  # T is any dataclass: no bound says so
    if not names.issuperset(changes):
        unknown = ", ".join(sorted(set(changes) - names))
        raise TypeError(f"{cls.__name__} has no field(s) {unknown}")
    copy = object.__new__(cls)
    state = copy.__dict__
    state.update(record.__dict__)
    state.update(changes)
    return copy


__all__ = ["evolve"]
