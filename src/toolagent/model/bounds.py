"""Byte bounds on tool results and deliverables: what is stored and answered stays under a cap.

Any MCP server may answer with a result of any size. Before a result becomes an execution's
(or a step's) stored result, and before a deliverable is stored, it is measured as compact JSON
(UTF-8). Over the cap, it is replaced by a bounded form that is still valid JSON of the same
shape, plus a `truncated` marker `{"maxBytes": cap, "sizeBytes": full size}`:

- every key of an object is kept; small values whole, large ones cut to a fair share of what is
  left (parts are served smallest first; a part that needs less than its share leaves the rest
  to the others);
- a list keeps its leading items (rows, content blocks) that fit whole; when not even the first
  fits, that one is cut the same way;
- a long string keeps a prefix (never a broken UTF-8 character);
- numbers, booleans and null are kept, or dropped (null) when nothing fits.

The execution's result spreads the cap over `structuredContent`, `content` and `text` this way;
a deliverable spreads it over its steps first, then over each step's fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from .spec import ToolResult


class CapSettings(Protocol):
    """The two caps as the process's settings read them (None: unset)."""

    @property
    def max_result_bytes(self) -> int | None: ...
    @property
    def max_deliverable_bytes(self) -> int | None: ...


#: Largest stored (and answered) tool result, in bytes of compact JSON.
DEFAULT_MAX_RESULT_BYTES = 1 << 20
#: Largest stored (and answered) deliverable: its rendered content plus its data, in bytes.
DEFAULT_MAX_DELIVERABLE_BYTES = 4 << 20
#: Bytes kept free under a cap for the `truncated` marker and for rounding.
RESERVE_BYTES = 256
#: A result whose text and content blocks hold fewer characters than this is bounded inline;
#: a larger one is measured and cut in a worker thread, off the event loop.
INLINE_CHARS = 64 * 1024
#: Most values `surely_within` looks at before it leaves the answer to a real measurement.
_QUICK_NODES = 512
#: Most bytes one character of a JSON string can take (a control character escaped as \u00XX).
_MAX_CHAR_BYTES = 6


@dataclass(frozen=True)
class ResultBounds:
    """The byte caps of one process (see the module docstring)."""

    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    """Largest tool result stored with an execution or a step, or answered."""
    max_deliverable_bytes: int = DEFAULT_MAX_DELIVERABLE_BYTES
    """Largest deliverable stored or answered."""

    @classmethod
    def from_settings(cls, s: CapSettings) -> ResultBounds:
        """Caps from settings already read (`toolagent.settings.Settings`; the defaults where unset)."""
        values = {"max_result_bytes": s.max_result_bytes, "max_deliverable_bytes": s.max_deliverable_bytes}
        return cls(**{k: v for k, v in values.items() if v is not None})


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON in UTF-8 (values JSON cannot hold count as their `str`)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))


def surely_within(value: Any, max_bytes: int) -> bool:
    """True when a quick upper bound of `value`'s JSON size is within `max_bytes`, looking at no
    more than a few hundred values; False means "measure it" (it may still fit).

    Most results are small: this spares the call path a full serialization just to learn that.
    """
    stack, total, seen = [value], 0, 0
    while stack:
        v = stack.pop()
        seen += 1
        if seen > _QUICK_NODES:
            return False
        if isinstance(v, str):
            total += _MAX_CHAR_BYTES * len(v) + 2
        elif type(v) is dict or isinstance(v, Mapping):  # the exact type first: spares the ABC check
            total += 2 + len(v)
            for k, item in v.items():
                total += _MAX_CHAR_BYTES * len(str(k)) + 3
                stack.append(item)
        elif isinstance(v, (list, tuple)):
            total += 2 + len(v)
            stack.extend(v)
        elif v is None or isinstance(v, bool):
            total += 5
        elif isinstance(v, int) and abs(v) < 10**20 or isinstance(v, float):
            total += 32
        else:
            return False
        if total > max_bytes:
            return False
    return True


def truncation(max_bytes: int, size: int) -> dict[str, int]:
    """The marker a bounded value carries: the cap and the full size, in bytes."""
    return {"maxBytes": max_bytes, "sizeBytes": size}


def fit(value: Any, budget: int) -> Any:
    """`value`, or a bounded copy of it of at most about `budget` bytes of JSON (module docstring)."""
    size = json_size(value)
    return value if size <= budget else _shrink(value, size, budget)


def fit_each(items: Sequence[Any], budget: int) -> list[Any]:
    """Every item of `items`, each cut to a fair share of `budget` (small items kept whole)."""
    return _share(list(items), max(0, budget - 2 - max(0, len(items) - 1)))


def _shrink(value: Any, size: int, budget: int) -> Any:
    if isinstance(value, str):
        return _prefix(value, budget)
    if isinstance(value, Mapping):
        keys = list(value)
        # Braces, each key with its quotes and colon, and the commas between them.
        overhead = 2 + sum(json_size(str(k)) + 2 for k in keys)
        return dict(zip(keys, _share([value[k] for k in keys], budget - overhead), strict=True))
    if isinstance(value, (list, tuple)):
        return _rows(list(value), budget)
    return None if size > budget else value


def _share(values: list[Any], budget: int) -> list[Any]:
    """Water-filling: the smallest values first, each whole when under an equal share of what is left."""
    sizes = [json_size(v) for v in values]
    out: list[Any] = list(values)
    left = budget
    remaining = len(values)
    for i in sorted(range(len(values)), key=sizes.__getitem__):
        share = max(0, left // remaining) if remaining else 0
        if sizes[i] > share:
            out[i] = _shrink(values[i], sizes[i], share)
            left -= json_size(out[i])
        else:
            left -= sizes[i]
        remaining -= 1
    return out


def _rows(items: list[Any], budget: int) -> list[Any]:
    kept: list[Any] = []
    used = 2
    for item in items:
        size = json_size(item) + (1 if kept else 0)
        if used + size > budget:
            break
        kept.append(item)
        used += size
    if not kept and items and budget > 2:
        first = items[0]
        kept.append(_shrink(first, json_size(first), budget - 2))
    return kept


def _prefix(text: str, budget: int) -> str:
    if budget <= 2:
        return ""
    # No character is less than one byte of JSON: `budget` characters are always enough to cut from.
    prefix = text[:budget].encode("utf-8")[: budget - 2].decode("utf-8", errors="ignore")
    while prefix and (over := json_size(prefix) - budget) > 0:
        prefix = prefix[: len(prefix) - max(1, over // 6)]  # escapes take up to six bytes a character
    return prefix


# -- tool results ---------------------------------------------------------------------------------


def looks_large(result: ToolResult) -> bool:
    """Whether `result` may be big enough to be worth bounding off the event loop."""
    chars = len(result.text)
    for block in result.content:
        for key in ("text", "data", "blob"):
            value = block.get(key)
            if isinstance(value, str):
                chars += len(value)
        if isinstance(block.get("resource"), Mapping):
            chars += sum(len(v) for v in block["resource"].values() if isinstance(v, str))
    return chars > INLINE_CHARS or result.structured is not None and chars == 0


def bound_result(result: ToolResult | None, max_bytes: int) -> ToolResult | None:
    """`result`, or its bounded form when its JSON passes `max_bytes` (a result already bounded
    under a larger cap is bounded again, and keeps the size it was first measured at)."""
    if result is None:
        return None
    raw = result.to_json()
    if surely_within(raw, max_bytes):
        return result
    size = json_size(raw)
    if size <= max_bytes:
        return result
    full = int(result.truncated["sizeBytes"]) if result.truncated else size
    parts = fit(
        {"structuredContent": result.structured, "content": result.content, "text": result.text},
        max_bytes - RESERVE_BYTES - json_size({k: raw[k] for k in ("isError",)}),
    )
    structured = parts["structuredContent"]
    return replace(
        result,
        structured=structured if isinstance(structured, dict) else None,
        content=list(parts["content"] or []),
        text=parts["text"] or "",
        truncated=truncation(max_bytes, full),
    )


def bound_result_json(raw: Mapping[str, Any] | None, max_bytes: int) -> Mapping[str, Any] | None:
    """The stored form (`ToolResult.to_json()`) of a result, bounded as `bound_result` does."""
    if raw is None or surely_within(raw, max_bytes) or json_size(raw) <= max_bytes:
        return raw
    bounded = bound_result(ToolResult.from_json(raw), max_bytes)
    assert bounded is not None
    return bounded.to_json()


def bound_each_result(items: Sequence[Mapping[str, Any]], max_bytes: int, key: str = "result") -> list[Any]:
    """`items` (JSON objects holding a stored result under `key`, e.g. a run's steps), with their
    results cut to fair shares (each at least 1 KiB) when together they pass `max_bytes`."""
    results = [item.get(key) for item in items]
    if surely_within(results, max_bytes):
        return list(items)
    sizes = [json_size(r) for r in results]
    if sum(sizes) <= max_bytes:
        return list(items)
    out = [dict(item) for item in items]
    left, remaining = max_bytes, len(items)
    for i in sorted(range(len(items)), key=sizes.__getitem__):
        share = max(1024, left // remaining)
        if sizes[i] > share and isinstance(results[i], Mapping):
            out[i][key] = bound_result_json(results[i], share)
            left -= json_size(out[i][key])
        else:
            left -= sizes[i]
        remaining -= 1
    return out


# -- deliverables ---------------------------------------------------------------------------------


def bound_deliverable(
    row: dict[str, Any], max_bytes: int, render: Callable[[dict[str, Any], dict[str, Any]], str]
) -> dict[str, Any]:
    """A deliverable row (`content`, `data`, `metadata`, ...) within `max_bytes`, or as it is.

    Over the cap, each step's result in `data["results"]` is cut to a fair share, `metadata`
    gets `truncated` (the cap and the full size), and `content` is rendered again from the bounded
    data by `render(data, metadata)`; when a rendering is still too long, it keeps a prefix and
    ends with a line saying so (a JSON rendering is instead reduced to its metadata, so it stays
    valid JSON).
    """
    size = _deliverable_size(row["content"], row["data"], row["metadata"])
    if size <= max_bytes:
        return row
    metadata = {**row["metadata"], "truncated": truncation(max_bytes, size)}
    room = max_bytes - RESERVE_BYTES - json_size(metadata)
    data = row["data"]
    results = data.get("results") or []
    others = json_size({k: v for k, v in data.items() if k != "results"})
    budget = max(0, room // 2 - others)
    content, bounded = row["content"], data
    for _ in range(4):
        bounded = {**data, "results": fit_each(results, budget)}
        content = render(bounded, metadata)
        total = _deliverable_size(content, bounded, metadata)
        if total <= max_bytes - RESERVE_BYTES // 2:
            break
        budget = int(budget * (max_bytes - RESERVE_BYTES) / total * 0.9)
    else:
        content = _cut_content(row["format"], content, metadata, max_bytes - json_size(bounded) - json_size(metadata))
    return {**row, "content": content, "data": bounded, "metadata": metadata}


def _deliverable_size(content: str, data: Any, metadata: Any) -> int:
    return len(content.encode("utf-8")) + json_size(data) + json_size(metadata)


def _cut_content(fmt: str, content: str, metadata: dict[str, Any], budget: int) -> str:
    if fmt == "json":
        return json.dumps({"metadata": metadata}, indent=2, default=str) + "\n"
    mark = metadata["truncated"]
    note = (
        f"\n… truncated: this deliverable is {mark['sizeBytes']} bytes, over the {mark['maxBytes']}-byte cap "
        "(TOOLAGENT_MAX_DELIVERABLE_BYTES)\n"
    )
    keep = max(0, budget - len(note.encode("utf-8")) - RESERVE_BYTES // 2)
    return content.encode("utf-8")[:keep].decode("utf-8", errors="ignore") + note


__all__ = [
    "DEFAULT_MAX_DELIVERABLE_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "ResultBounds",
    "bound_deliverable",
    "bound_each_result",
    "bound_result",
    "bound_result_json",
    "fit",
    "fit_each",
    "json_size",
    "looks_large",
    "surely_within",
    "truncation",
]
