"""Untrusted JSON and text from outside (HTTP bodies, query parameters, CLI options and files),
checked once for what no database, template or tool can take:

- a NUL character (PostgreSQL text and JSON cannot hold it; SQLite would store it silently);
- a lone UTF-16 surrogate (`"\\ud800"` in JSON): it has no UTF-8 form, so it cannot be stored,
  logged or sent to a tool;
- text that is not UTF-8 or not JSON, `NaN` / `Infinity` and numbers too large for a double,
  integers past 64 bits, and nesting deeper than `MAX_JSON_DEPTH`.

`InputProblem.field` names the offending value by its path (`payload.items[2].name`), so the
HTTP API answers 400 and the CLI exits 2 naming it.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: Deepest nesting of arrays and objects a JSON body may have.
MAX_JSON_DEPTH = 64
#: Largest magnitude of a JSON integer (a signed 64-bit value, what databases and tools agree on).
MAX_JSON_INT = 2**63 - 1


class InputProblem(ValueError):
    """An input refused before use: `field` names it (`payload.text`, `path`, `query.org`, `--payload`)."""

    def __init__(self, field: str, message: str, *, unparsable: bool = False) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.unparsable = unparsable
        """The text is not JSON at all (tRPC's PARSE_ERROR), rather than JSON holding a refused value."""


def _refuse_constant(name: str) -> Any:
    raise InputProblem("", f"{name} is not a JSON number: send a finite number or a string")


def text_problem(value: str) -> str | None:
    """Why `value` cannot be stored (a NUL, a lone surrogate), or None."""
    if "\x00" in value:
        return "contains a NUL character (\\u0000), which cannot be stored: remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (e.g. \\ud800), which is not text: send valid Unicode"
    return None


def check_text(value: str, field: str) -> None:
    """Refuse a string with a NUL character or a lone surrogate.

    Raises:
        InputProblem: naming `field`.
    """
    problem = text_problem(value)
    if problem is not None:
        raise InputProblem(field, problem)


def _join(field: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{field}[{key}]"
    return f"{field}.{key}" if field else key


def check_value(value: Any, field: str = "") -> None:
    """Walk parsed JSON (without recursion) and refuse what `parse_json` describes.

    Raises:
        InputProblem: the first offending value, naming its path (`payload.items[2].name`).
    """
    stack: list[tuple[Any, str, int]] = [(value, field, 0)]
    while stack:
        item, where, depth = stack.pop()
        if isinstance(item, str):
            check_text(item, where or "body")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INT:
                raise InputProblem(
                    where or "body", f"integer {str(item)[:20]}... is larger than 64 bits: send it as a string"
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InputProblem(
                    where or "body",
                    "number is too large for a double (or not finite): send a smaller number or a string",
                )
        elif isinstance(item, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                raise InputProblem(where or "body", f"nested deeper than {MAX_JSON_DEPTH} levels: flatten the value")
            entries = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in entries:
                if isinstance(key, str):
                    problem = text_problem(key)
                    if problem is not None:
                        raise InputProblem(where or "body", f"a key {problem}")
                stack.append((child, _join(where, key), depth + 1))


def parse_json(raw: bytes | str, field: str = "body") -> Any:
    """Parse JSON text and check it with `check_value`.

    Raises:
        InputProblem: not UTF-8, not JSON, or a refused value; `field` prefixes the path.
    """
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputProblem(
                field, f"is not UTF-8 (byte {exc.start}): send UTF-8 encoded JSON", unparsable=True
            ) from None
    try:
        value = json.loads(raw, parse_constant=_refuse_constant)
    except InputProblem as exc:
        raise InputProblem(field, exc.message) from None
    except RecursionError:
        raise InputProblem(field, f"nested deeper than {MAX_JSON_DEPTH} levels: flatten the value") from None
    except json.JSONDecodeError as exc:
        raise InputProblem(
            field, f"is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", unparsable=True
        ) from None
    except ValueError:  # an integer of more digits than Python converts
        raise InputProblem(field, "holds an integer of thousands of digits: send it as a string") from None
    check_value(value, "" if field == "body" else field)
    return value


__all__ = ["MAX_JSON_DEPTH", "MAX_JSON_INT", "InputProblem", "check_text", "check_value", "parse_json", "text_problem"]
