"""Fail-fast validation of agent definitions: every problem, each with its field path.

Parsing (YAML or JSON text -> dict), schema validation (pydantic, unknown keys named with the
nearest valid key) and the contract's own rules (tools present and namespaced, `toolParams`
keyed by configured tools, templates well-formed) all report `Problem`s; nothing falls back to
a default when a key is misspelled.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import DefinitionInvalid, Problem, TemplateError
from ..inputs import InputProblem, check_value
from ..interpolation import ParamsTemplate
from ..model.spec import NAMESPACE_SEPARATOR
from .models import AgentDef
from .yaml_loader import YamlTooLarge, safe_load

MSG_NO_TOOLS = "No tools configured for this agent"


def msg_no_namespace(name: str) -> str:
    """The message for a tool without a namespace (the contract's own wording)."""
    return f"Tool '{name}' must include namespace: expected 'namespace/tool'"


def parse_document(text: str, *, source: str | None = None) -> Any:
    """Parse YAML or JSON text (JSON is tried first when the text looks like an object).

    Raises:
        DefinitionInvalid: with the line and column of the syntax error, or the path of a value
            `toolagent.inputs.check_value` refuses.
    """
    data = _parse(text, source)
    try:
        # What no store can hold (a NUL, a lone surrogate) or no tool should get (NaN, a 20-digit
        # integer, 1000 levels of nesting) is refused here, with its path, not when a run writes it.
        check_value(data)
    except InputProblem as exc:
        raise DefinitionInvalid([Problem(exc.field, exc.message)], source=source) from None
    return data


def _parse(text: str, source: str | None) -> Any:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise DefinitionInvalid(
                [Problem("", f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}")], source=source
            ) from exc
        except RecursionError:
            raise DefinitionInvalid([Problem("", "JSON nested too deep")], source=source) from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise DefinitionInvalid(
                [Problem("", f"an integer of thousands of digits ({exc.__class__.__name__}): write it as a string")],
                source=source,
            ) from None
    try:
        return safe_load(text)
    except YamlTooLarge as exc:
        raise DefinitionInvalid([Problem("", f"YAML refused: {exc}")], source=source) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise DefinitionInvalid([Problem("", f"malformed YAML{where}: {exc.problem or exc}")], source=source) from exc
    except yaml.YAMLError as exc:
        raise DefinitionInvalid([Problem("", f"malformed YAML: {exc}")], source=source) from exc


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the key at `loc` (the last element is the key)."""
    model: Any = AgentDef
    for part in loc[:-1]:
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            return None
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        model = _unwrap(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    if get_origin(annotation) is not None:
        for arg in get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return annotation


def _enum_at(loc: tuple[Any, ...]) -> type[Enum] | None:
    owner = _model_at(loc)
    if owner is None:
        return None
    field = owner.model_fields.get(str(loc[-1]))
    ann = field.annotation if field else None
    return ann if isinstance(ann, type) and issubclass(ann, Enum) else None


def _format_error(err: Mapping[str, Any]) -> Problem:
    loc = tuple(err["loc"])
    path = ".".join(str(p) for p in loc)
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        owner = _model_at(loc)
        valid = sorted(owner.model_fields) if owner else []
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        hint = f"; did you mean '{close[0]}'?" if close else (f"; valid keys: {', '.join(valid)}" if valid else "")
        return Problem(path, f"unknown key '{key}'{hint}")
    if kind == "enum":
        enum = _enum_at(loc)
        choices = ", ".join(e.value for e in enum) if enum else err.get("ctx", {}).get("expected", "")
        name = str(loc[-1])
        return Problem(path, f"invalid {name} {err.get('input')!r}: expected one of {choices}")
    if kind == "missing":
        return Problem(path, "required key is missing")
    return Problem(path, str(err["msg"]))


def _semantic_problems(data: Mapping[str, Any]) -> list[Problem]:
    """The contract's own rules, over the raw document so they run even when the schema failed."""
    problems: list[Problem] = []
    cfg = data.get("configuration")
    if not isinstance(cfg, Mapping):
        return problems
    raw_tools = cfg.get("tools")
    tools = [t for t in raw_tools if isinstance(t, str)] if isinstance(raw_tools, list) else []
    if not raw_tools:
        problems.append(Problem("configuration.tools", MSG_NO_TOOLS))
    seen: set[str] = set()
    for i, name in enumerate(tools):
        ns, sep, tool = name.partition(NAMESPACE_SEPARATOR)
        if not sep or not ns or not tool or NAMESPACE_SEPARATOR in tool:
            problems.append(Problem(f"configuration.tools[{i}]", msg_no_namespace(name)))
        elif name in seen:
            problems.append(Problem(f"configuration.tools[{i}]", f"tool '{name}' is listed twice"))
        seen.add(name)
    params = cfg.get("toolParams")
    for key, value in params.items() if isinstance(params, Mapping) else ():
        where = f"configuration.toolParams.{key}"
        if key not in tools:
            close = difflib.get_close_matches(str(key), tools, n=1, cutoff=0.5)
            hint = f"; did you mean '{close[0]}'?" if close else f"; configured tools: {', '.join(tools) or 'none'}"
            problems.append(Problem(where, f"toolParams key '{key}' is not one of the configured tools{hint}"))
        try:
            ParamsTemplate.parse(value, where=where)
        except TemplateError as exc:
            problems.append(Problem(exc.path or where, exc.detail))
    return problems


def validate_definition(data: Any, *, source: str | None = None) -> AgentDef:
    """Validate a parsed document into an `AgentDef`.

    Raises:
        DefinitionInvalid: listing every problem found.
    """
    if not isinstance(data, Mapping):
        got = "an empty document" if data is None else type(data).__name__
        raise DefinitionInvalid(
            [Problem("", f"expected a mapping with metadata and configuration, got {got}")], source=source
        )
    problems: list[Problem] = []
    defn: AgentDef | None = None
    cause: ValidationError | None = None
    try:
        defn = AgentDef.model_validate(data)
    except ValidationError as exc:
        cause = exc
        problems = [_format_error(e) for e in exc.errors()]
    reported = {p.path for p in problems}
    problems += [p for p in _semantic_problems(data) if p.path not in reported]
    if problems or defn is None:
        raise DefinitionInvalid(problems, source=source) from cause
    return defn


def load_definition_text(text: str, *, source: str | None = None) -> AgentDef:
    """Parse and validate YAML or JSON text."""
    return validate_definition(parse_document(text, source=source), source=source)
