"""A Python function's tool description: its JSON Schema from the signature, type hints and docstring.

```python
def search(query: str, limit: Annotated[int, Field(ge=1, le=50)] = 10) -> list[dict]:
    \"\"\"Search the notes.

    Args:
        query: Words to look for.
        limit: At most this many notes.
    \"\"\"
```

gives the description "Search the notes." and an object schema with `query` (required, string,
"Words to look for.") and `limit` (integer, 1..50, default 10, "At most this many notes."). A
description in `Annotated[..., Field(description=...)]` wins over the docstring's. Arguments are
validated (and converted: a `datetime`, a pydantic model, an enum) by the same pydantic model the
schema comes from, so the schema and the check cannot disagree.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

from ..errors import ConfigError

# Google-style sections (`Args:`, `Returns:` ...): the description is what comes before the first one.
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Yields|Raises|Examples?|Notes?):\s*$")
# `name: text` or `name (type): text` at the start of an `Args:` entry.
_ARG = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class FunctionSchema:
    """What a function offers as a tool."""

    description: str
    """The docstring's text before its first section."""
    input_schema: dict[str, Any]
    """JSON Schema of the arguments (an object)."""
    arguments: type[BaseModel]
    """The pydantic model that validates and converts them."""


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """A Google-style docstring's description and its `Args:` entries (name -> text)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None  # of the section's entries; deeper lines continue the entry above
    for line in lines:
        header = _SECTION.match(line)
        if header is not None:
            section, current, indent = header.group(1).lower(), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in ("args", "arguments", "parameters", "params") or not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        entry = _ARG.match(line.strip())
        if entry is not None and (indent is None or depth <= indent):
            indent, current = depth, entry.group(1).lstrip("*")
            params[current] = entry.group(2).strip()
        elif current is not None:
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        return any(isinstance(m, FieldInfo) and m.description for m in get_args(annotation)[1:])
    return False


def function_schema(fn: Callable[..., Any], *, name: str | None = None) -> FunctionSchema:
    """The tool description of `fn`.

    Raises:
        ConfigError: a parameter cannot be a tool argument (`*args`, positional-only), or a type
            hint cannot be resolved or turned into a schema.
    """
    label = name or getattr(fn, "__name__", repr(fn))
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ConfigError(f"function '{label}': cannot read its signature or type hints ({exc})") from exc
    description, documented = parse_docstring(inspect.getdoc(fn))
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigError(
                f"function '{label}': parameter '{param.name}' is {param.kind.description}; a tool takes named "
                "arguments only: give it a name and a type"
            )
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        doc = documented.get(param.name)
        info = Field(default, description=doc) if doc and not _has_description(annotation) else Field(default)
        fields[param.name] = (annotation, info)
    try:
        model = create_model(
            f"{label}_arguments", __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False), **fields
        )
        schema = model.model_json_schema()
    except Exception as exc:  # pydantic raises several kinds for a type it cannot describe
        raise ConfigError(f"function '{label}': its arguments cannot be described as JSON Schema ({exc})") from exc
    schema.pop("title", None)
    return FunctionSchema(description, schema, model)


__all__ = ["FunctionSchema", "function_schema", "parse_docstring"]
