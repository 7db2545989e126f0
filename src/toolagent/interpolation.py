"""Parameter templates: parsed when a definition loads, rendered when a step runs.

Both `{{payload.a.b}}` and `<<payload.a.b>>` mean the same reference. A string that is exactly
one reference keeps the referenced value's type; a reference inside a longer string renders as
text. Rendering runs in Jinja's sandbox with no globals, so templates reach only the context
they are given (`payload`, `metadata`, `steps`, `previous`): no Python internals, environment
variables or files. A reference that does not resolve is an error naming the path, never "".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.sandbox import SandboxedEnvironment

from .errors import TemplateError

#: Names a template may start a reference with.
TEMPLATE_ROOTS = frozenset({"payload", "metadata", "steps", "previous"})

_ANGLE = re.compile(r"<<(.*?)>>", re.DOTALL)
_SINGLE = re.compile(r"^\s*(?:\{\{(?P<a>.*?)\}\}|<<(?P<b>.*?)>>)\s*$", re.DOTALL)
_MARKERS = ("{{", "<<", "{%", "{#")


def to_text(value: Any) -> Any:
    """How a value appears inside a longer string: containers as JSON, the rest as-is."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=to_text
    )
    # No globals: `range`, `dict`, `lipsum`, `cycler`... are not needed by parameter templates.
    env.globals.clear()
    return env


_ENV = _environment()


def is_template(value: str) -> bool:
    """True when the string holds template markup."""
    return any(m in value for m in _MARKERS)


def _reference_paths(node: nodes.Node) -> list[list[str]]:
    """Dotted paths of every `name.attr['key']` chain in an expression tree."""
    paths: list[list[str]] = []

    def chain(n: nodes.Node) -> list[str] | None:
        if isinstance(n, nodes.Name):
            return [n.name]
        if isinstance(n, nodes.Getattr):
            head = chain(n.node)
            return None if head is None else [*head, n.attr]
        if isinstance(n, nodes.Getitem) and isinstance(n.arg, nodes.Const):
            head = chain(n.node)
            return None if head is None else [*head, str(n.arg.value)]
        return None

    def visit(n: nodes.Node) -> None:
        path = chain(n)
        if path is not None and len(path) > 0 and isinstance(n, (nodes.Getattr, nodes.Getitem, nodes.Name)):
            paths.append(path)
            return
        for child in n.iter_child_nodes():
            visit(child)

    visit(node)
    return paths


def _resolve(context: Mapping[str, Any], path: list[str]) -> tuple[bool, str]:
    """Walk `path` through plain containers; report where it stops resolving."""
    current: Any = context
    for depth, part in enumerate(path):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            where = ".".join(path[:depth]) or "the context"
            keys = sorted(map(str, current)) if isinstance(current, Mapping) else []
            hint = f" (available: {', '.join(keys[:20])})" if keys else ""
            return False, f"'{'.'.join(path[: depth + 1])}' is not set in {where}{hint}"
    return True, ""


@dataclass(frozen=True)
class Template:
    """One parsed string template.

    Attributes:
        source: the text as written.
        single: True when the text is exactly one reference (the value keeps its type).
    """

    source: str
    single: bool
    _compiled: Any
    _paths: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, source: str, *, where: str = "") -> Template:
        """Parse a template, checking that every reference starts at a known root.

        Raises:
            TemplateError: the template is malformed or references an unknown root.
        """
        match = _SINGLE.match(source)
        try:
            if match is not None:
                expr = (match.group("a") if match.group("a") is not None else match.group("b")).strip()
                if "}}" in expr or ">>" in expr or "{{" in expr or "<<" in expr:
                    match = None
            if match is not None:
                tree = _ENV.parse("{{ " + expr + " }}")
                compiled: Any = _ENV.compile_expression(expr, undefined_to_none=False)
            else:
                text = _ANGLE.sub(lambda m: "{{" + m.group(1) + "}}", source)
                tree = _ENV.parse(text)
                compiled = _ENV.from_string(text)
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"malformed template {source!r}: {exc.message}", path=where or None) from exc
        roots = jinja2.meta.find_undeclared_variables(tree)
        unknown = sorted(roots - TEMPLATE_ROOTS)
        if unknown:
            raise TemplateError(
                f"template {source!r} references unknown name '{unknown[0]}': "
                f"use one of {', '.join(sorted(TEMPLATE_ROOTS))}",
                path=where or None,
            )
        paths = tuple(tuple(p) for p in _reference_paths(tree))
        return cls(source=source, single=match is not None, _compiled=compiled, _paths=paths)

    def render(self, context: Mapping[str, Any], *, where: str = "") -> Any:
        """Render against `context`.

        Raises:
            TemplateError: a reference is missing or the sandbox refused an operation.
        """
        for path in self._paths:
            ok, why = _resolve(context, list(path))
            if not ok:
                raise TemplateError(f"template {self.source!r}: {why}", path=where or None)
        try:
            if self.single:
                value = self._compiled(**context)
                if isinstance(value, jinja2.Undefined):
                    value._fail_with_undefined_error()
                return value
            return self._compiled.render(**context)
        except jinja2.exceptions.SecurityError as exc:
            raise TemplateError(f"template {self.source!r} was refused by the sandbox: {exc}", path=where or None) from exc
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {self.source!r}: {exc.message}", path=where or None) from exc
        except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
            raise TemplateError(f"template {self.source!r} failed: {exc}", path=where or None) from exc


@dataclass(frozen=True)
class ParamsTemplate:
    """A tool's whole parameter object with every template string parsed in place."""

    value: Any

    @classmethod
    def parse(cls, params: Any, *, where: str = "") -> ParamsTemplate:
        """Parse every template string inside `params` (dicts and lists are walked)."""
        return cls(_parse_tree(params, where))

    def render(self, context: Mapping[str, Any]) -> Any:
        """A fresh parameter object with every template rendered."""
        return _render_tree(self.value, context)

    def references(self) -> set[str]:
        """Dotted references used anywhere in the parameters."""
        found: set[str] = set()
        _collect(self.value, found)
        return found


@dataclass(frozen=True)
class _Located:
    template: Template
    where: str


def _parse_tree(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return _Located(Template.parse(value, where=where), where) if is_template(value) else value
    if isinstance(value, Mapping):
        return {k: _parse_tree(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_parse_tree(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _render_tree(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, _Located):
        return value.template.render(context, where=value.where)
    if isinstance(value, dict):
        return {k: _render_tree(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_tree(v, context) for v in value]
    return value


def _collect(value: Any, found: set[str]) -> None:
    if isinstance(value, _Located):
        found.update(".".join(p) for p in value.template._paths)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, found)
    elif isinstance(value, list):
        for v in value:
            _collect(v, found)


def render_value(source: str, context: Mapping[str, Any]) -> Any:
    """Parse and render one string in a single call (for ad-hoc use and tests)."""
    return Template.parse(source).render(context)


