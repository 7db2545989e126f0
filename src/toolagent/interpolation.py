"""Parameter templates: parsed when a definition loads, rendered when a step runs.

Both `{{payload.a.b}}` and `<<payload.a.b>>` mean the same reference. A string that is exactly
one reference keeps the referenced value's type; a reference inside a longer string renders as
text. Rendering runs in Jinja's sandbox with no globals, so templates reach only the context
they are given (`payload`, `metadata`, `steps`, `previous`): no Python internals, environment
variables or files. A reference that does not resolve is an error naming the path, never "".

`<<...>>` is a reference only when what it holds has the shape of one (a name, then a path,
a filter or nothing: `<<payload.a[0]>>`, `<< steps.x | length >>`), so SQL's `<<` and `>>`
operators (`1 << 4`, `'10.0.0.0/8' >> inet`, `a << 2 and b >> 3`) stay text; a
reference-shaped `<<name...>>` whose name is not a root is still an error at load. Write `\<<` for a literal `<<` that
would otherwise read as a reference: `\<<payload.x>>` renders as `<<payload.x>>`.

Templates are bounded (`TemplateLimits` in `_sandbox.py`): source size at parse time, and
output size, integer size, string repetition, loop iterations and time while rendering.
`render_async` renders off the event loop in a worker thread with the same time bound.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import jinja2
import jinja2.meta
from jinja2 import nodes
from jinja2.environment import TemplateExpression

from ._sandbox import (
    DEFAULT_LIMITS,
    LimitExceeded,
    TemplateLimits,
    bound_tree,
    build_environment,
    end_budget,
    start_budget,
    uses_reserved_names,
)
from .errors import TemplateError

#: Names a template may start a reference with.
TEMPLATE_ROOTS = frozenset({"payload", "metadata", "steps", "previous"})

#: `<<...>>` holding no `<<`, optionally escaped with a backslash before it.
_ANGLE = re.compile(r"(\\?)<<((?:(?!<<).)*?)>>", re.DOTALL)
#: The shape of a `<<...>>` reference: a name, then a path (`.a`, `[0]`), a filter or the end.
#: Anything else (`<< 2 from t where y >>`, `<<not a ref>>`) is left as text.
_ANGLE_REFERENCE = re.compile(r"\s*[A-Za-z_]\w*\s*(?:[.\[|]|$)", re.DOTALL)
_SINGLE = re.compile(r"^\s*\{\{(?P<a>.*?)\}\}\s*$", re.DOTALL)
_JINJA_MARKERS = ("{{", "{%", "{#")


def to_text(value: Any) -> Any:
    """How a value appears inside a longer string: containers as JSON, the rest as-is."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


_ENV = build_environment(to_text)


def _angle_reference(match: re.Match[str]) -> bool:
    return not match.group(1) and _ANGLE_REFERENCE.match(match.group(2)) is not None


def _convert_angles(source: str) -> str:
    """`<<ref>>` -> `{{ref}}`, `\\<<` -> `<<`; any other `<<...>>` stays as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1):
            return "<<" + match.group(2) + ">>"
        return "{{" + match.group(2) + "}}" if _angle_reference(match) else match.group(0)

    # What is left of `\<<` had no closing `>>`; it is still an escaped `<<`.
    return unescape(_ANGLE.sub(replace, source))


def unescape(value: str) -> str:
    """The literal text of a string that holds no reference (`\\<<` becomes `<<`)."""
    return value.replace("\\<<", "<<")


def is_template(value: str) -> bool:
    """True when the string holds template markup: `{{`, `{%`, `{#` or a `<<root...>>` reference."""
    return any(m in value for m in _JINJA_MARKERS) or any(_angle_reference(m) for m in _ANGLE.finditer(value))


def _is_reference(n: nodes.Node) -> bool:
    """A bare `name.attr['key']` chain: no call, filter, operator or loop."""
    while isinstance(n, (nodes.Getattr, nodes.Getitem)):
        if isinstance(n, nodes.Getitem) and not isinstance(n.arg, nodes.Const):
            return False
        n = n.node
    return isinstance(n, nodes.Name)


def _only_references(tree: nodes.Template) -> bool:
    """True when a template is text and bare references only: rendering it costs no more than
    copying the values it names, so it needs no worker thread."""
    return all(
        isinstance(out, nodes.Output) and all(isinstance(n, nodes.TemplateData) or _is_reference(n) for n in out.nodes)
        for out in tree.body
    )


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
        # Only paths from a context root: loop variables, `set` names and macro arguments are
        # the template's own.
        if path and path[0] in TEMPLATE_ROOTS and isinstance(n, (nodes.Getattr, nodes.Getitem, nodes.Name)):
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
        plain: True when the text holds nothing but bare references (no filter, call,
            operator or loop), so rendering it is cheap enough for the event loop.
    """

    source: str
    single: bool
    _compiled: Any
    _paths: tuple[tuple[str, ...], ...]
    plain: bool = False

    @classmethod
    def parse(cls, source: str, *, where: str = "", limits: TemplateLimits = DEFAULT_LIMITS) -> Template:
        """Parse a template, checking that every reference starts at a known root.

        Raises:
            TemplateError: the template is malformed, too long, or references an unknown root.
        """
        if len(source) > limits.max_source_chars:
            raise TemplateError(
                f"template is {len(source)} characters long, over the limit of {limits.max_source_chars}",
                path=where or None,
            )
        if uses_reserved_names(source):
            raise TemplateError(f"template {source[:80]!r} uses a reserved name (_toolagent_...)", path=where or None)
        text = _convert_angles(source)
        match = _SINGLE.match(text)
        try:
            if match is not None:
                expr = match.group("a").strip()
                if "}}" in expr or "{{" in expr:
                    match = None
            if match is not None:
                tree = _ENV.parse("{{ " + expr + " }}")
                compiled: Any = _compile_expression(expr)
            else:
                tree = _ENV.parse(text)
                compiled = _ENV.from_string(bound_tree(_ENV.parse(text)))
        except jinja2.TemplateSyntaxError as exc:
            raise TemplateError(f"malformed template {source!r}: {exc.message}", path=where or None) from exc
        except (RecursionError, ValueError, MemoryError) as exc:
            raise TemplateError(
                f"template {source[:80]!r} cannot be parsed: {type(exc).__name__}", path=where or None
            ) from exc
        roots = jinja2.meta.find_undeclared_variables(tree)
        unknown = sorted(roots - TEMPLATE_ROOTS)
        if unknown:
            raise TemplateError(
                f"template {source!r} references unknown name '{unknown[0]}': "
                f"use one of {', '.join(sorted(TEMPLATE_ROOTS))}",
                path=where or None,
            )
        paths = tuple(tuple(p) for p in _reference_paths(tree))
        return cls(
            source=source, single=match is not None, _compiled=compiled, _paths=paths, plain=_only_references(tree)
        )

    def render(self, context: Mapping[str, Any], *, where: str = "", limits: TemplateLimits = DEFAULT_LIMITS) -> Any:
        """Render against `context` within `limits` (a render already under way shares its budget).

        Raises:
            TemplateError: a reference is missing, the sandbox refused an operation, or the
                render went past a bound (the message names the bound and the parameter).
        """
        for path in self._paths:
            ok, why = _resolve(context, list(path))
            if not ok:
                raise TemplateError(f"template {self.source!r}: {why}", path=where or None)
        token = start_budget(limits)
        try:
            if self.single:
                value = self._compiled(**context)
                if isinstance(value, jinja2.Undefined):
                    value._fail_with_undefined_error()
                return value
            return _render_text(self._compiled, context, limits)
        except LimitExceeded as exc:
            shown = self.source if len(self.source) <= 80 else self.source[:77] + "..."
            raise TemplateError(f"template {shown!r} went past a bound: {exc}", path=where or None) from exc
        except RecursionError as exc:
            raise TemplateError(f"template {self.source[:80]!r} recursed too deeply", path=where or None) from exc
        except jinja2.exceptions.SecurityError as exc:
            raise TemplateError(
                f"template {self.source!r} was refused by the sandbox: {exc}", path=where or None
            ) from exc
        except jinja2.UndefinedError as exc:
            raise TemplateError(f"template {self.source!r}: {exc.message}", path=where or None) from exc
        except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
            raise TemplateError(f"template {self.source!r} failed: {exc}", path=where or None) from exc
        finally:
            end_budget(token)

    async def render_async(
        self, context: Mapping[str, Any], *, where: str = "", limits: TemplateLimits = DEFAULT_LIMITS
    ) -> Any:
        """`render` in a worker thread, so the event loop keeps serving while it runs.

        Raises:
            TemplateError: as `render`, and when the render outlasts `limits.time_s`.
        """
        return await _off_loop(functools.partial(self.render, context, where=where, limits=limits), limits, where)


@dataclass(frozen=True)
class ParamsTemplate:
    """A tool's whole parameter object with every template string parsed in place."""

    value: Any

    @classmethod
    def parse(cls, params: Any, *, where: str = "", limits: TemplateLimits = DEFAULT_LIMITS) -> ParamsTemplate:
        """Parse every template string inside `params` (dicts and lists are walked)."""
        return cls(_parse_tree(params, where, limits))

    def render(self, context: Mapping[str, Any], *, limits: TemplateLimits = DEFAULT_LIMITS) -> Any:
        """A fresh parameter object with every template rendered; all of them share one budget."""
        token = start_budget(limits)
        try:
            return _render_tree(self.value, context)
        finally:
            end_budget(token)

    async def render_async(self, context: Mapping[str, Any], *, limits: TemplateLimits = DEFAULT_LIMITS) -> Any:
        """`render` in a worker thread, bounded by `limits.time_s` (see `Template.render_async`)."""
        return await _off_loop(functools.partial(self.render, context, limits=limits), limits, "")

    @functools.cached_property
    def plain(self) -> bool:
        """True when every template in the parameters is `Template.plain`."""
        return _all_plain(self.value)

    def references(self) -> set[str]:
        """Dotted references used anywhere in the parameters."""
        found: set[str] = set()
        _collect(self.value, found)
        return found


@dataclass(frozen=True)
class _Located:
    template: Template
    where: str


def template_source(params: ParamsTemplate, path: tuple[str | int, ...]) -> str | None:
    """The template text that renders the argument at `path`, or None when a literal value (or
    nothing) is there."""
    node: Any = params.value
    for key in path:
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            return None
    return node.template.source if isinstance(node, _Located) else None


def _parse_tree(value: Any, where: str, limits: TemplateLimits) -> Any:
    if isinstance(value, str):
        if is_template(value):
            return _Located(Template.parse(value, where=where, limits=limits), where)
        return unescape(value)
    if isinstance(value, Mapping):
        return {k: _parse_tree(v, f"{where}.{k}" if where else str(k), limits) for k, v in value.items()}
    if isinstance(value, list):
        return [_parse_tree(v, f"{where}[{i}]", limits) for i, v in enumerate(value)]
    return value


def _compile_expression(expr: str) -> TemplateExpression:
    """Jinja's `compile_expression`, with the tree rewritten by `bound_tree` first."""
    parser = jinja2.parser.Parser(_ENV, expr, state="variable")
    body = parser.parse_expression()
    if not parser.stream.eos:
        raise jinja2.TemplateSyntaxError("chunk after expression", parser.stream.current.lineno, None, None)
    tree = nodes.Template([nodes.Assign(nodes.Name("result", "store"), body, lineno=1)], lineno=1)
    tree.set_environment(_ENV)
    return TemplateExpression(_ENV.from_string(bound_tree(tree)), undefined_to_none=False)


def _render_text(template: jinja2.Template, context: Mapping[str, Any], limits: TemplateLimits) -> str:
    """Render piece by piece, stopping as soon as the text passes `max_output_chars`."""
    parts: list[str] = []
    size = 0
    for piece in template.generate(**context):
        size += len(piece)
        if size > limits.max_output_chars:
            raise LimitExceeded(f"output is over {limits.max_output_chars} characters (max_output_chars)")
        parts.append(piece)
    return "".join(parts)


async def _off_loop(render: Any, limits: TemplateLimits, where: str) -> Any:
    # The render checks its own deadline between operations; this bound (with a margin) only
    # frees the caller if one operation overruns. The thread then finishes on its own.
    try:
        with anyio.fail_after(limits.time_s + 1.0):
            return await anyio.to_thread.run_sync(render, abandon_on_cancel=True)
    except TimeoutError as exc:
        raise TemplateError(f"rendering took longer than {limits.time_s:g} s (time_s)", path=where or None) from exc


def _render_tree(value: Any, context: Mapping[str, Any]) -> Any:
    if isinstance(value, _Located):
        return value.template.render(context, where=value.where)
    if isinstance(value, dict):
        return {k: _render_tree(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_render_tree(v, context) for v in value]
    return value


def _all_plain(value: Any) -> bool:
    if isinstance(value, _Located):
        return value.template.plain
    if isinstance(value, dict):
        return all(_all_plain(v) for v in value.values())
    if isinstance(value, list):
        return all(_all_plain(v) for v in value)
    return True


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
