"""The bounded Jinja sandbox that parameter templates render in.

Jinja's `SandboxedEnvironment` stops access to Python internals but not work: `2**100000`,
`'x' * 10**9`, `x|wordwrap(1)` on a long string or nested loops can each hold a thread (and
the memory) for as long as they like. Here every operation that can grow a value or take
time goes through a check against a `TemplateLimits` budget kept for the current render:

* arithmetic: `**` and `*` on integers may not produce more than `max_int_bits` bits, `*` and
  `+` on strings or lists may not produce more than `max_output_chars` items, `%` on a
  string (printf formatting, whose widths allocate) is refused;
* filters: only those in `SAFE_FILTERS`, and none of them on a string longer than
  `max_filter_input_chars`; a filter's result is checked like a concatenation's (`~`);
* method calls on strings: only `SAFE_STR_METHODS`, with `replace` checked before it runs;
* `{% for %}` loops: at most `max_loop_iterations` iterations per render, all loops counted;
* every call, filter, operation and loop iteration checks the render's deadline (`time_s`).

A breach raises `LimitExceeded`, which `interpolation.py` turns into a `TemplateError`
naming the parameter. The deadline is checked between operations, so one operation runs to
its end; the input bounds keep each under a second.
"""

from __future__ import annotations

import contextvars
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment


@dataclass(frozen=True)
class TemplateLimits:
    """Bounds on one template (or one parameter object) while it is parsed and rendered."""

    max_source_chars: int = 10_000
    """Longest template text accepted at parse time."""
    max_output_chars: int = 1_000_000
    """Longest rendered text, and longest string or list an operation may build."""
    max_int_bits: int = 4_096
    """Largest integer `**` or `*` may produce, in bits (about 1,233 decimal digits)."""
    max_filter_input_chars: int = 100_000
    """Longest string a filter may be applied to."""
    max_loop_iterations: int = 100_000
    """Most `{% for %}` iterations per render, over all loops."""
    time_s: float = 2.0
    """Longest a render may run, in seconds."""


#: The bounds used when a caller gives none.
DEFAULT_LIMITS = TemplateLimits()


class LimitExceeded(Exception):
    """A template went past one of its `TemplateLimits`; the message names the bound."""


@dataclass
class _Budget:
    limits: TemplateLimits
    deadline: float
    iterations: int = field(default=0)


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("toolagent_template_budget", default=None)


def start_budget(limits: TemplateLimits) -> contextvars.Token[_Budget | None] | None:
    """Open a budget for one render unless one is already open (nested renders share it)."""
    if _BUDGET.get() is not None:
        return None
    return _BUDGET.set(_Budget(limits, time.monotonic() + limits.time_s))


def end_budget(token: contextvars.Token[_Budget | None] | None) -> None:
    """Close the budget `start_budget` opened."""
    if token is not None:
        _BUDGET.reset(token)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    return budget if budget is not None else _Budget(DEFAULT_LIMITS, time.monotonic() + DEFAULT_LIMITS.time_s)


def tick() -> _Budget:
    """Check the deadline; return the current budget."""
    budget = _budget()
    if time.monotonic() > budget.deadline:
        raise LimitExceeded(f"rendering took longer than {budget.limits.time_s:g} s (time_s)")
    return budget


def _sized(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, list, tuple, bytes)) else None


def check_size(value: Any, what: str = "value") -> Any:
    """Refuse a string or list longer than `max_output_chars`; return `value`."""
    limits = tick().limits
    size = _sized(value)
    if size is not None and size > limits.max_output_chars:
        raise LimitExceeded(f"{what} would be {size} long, over {limits.max_output_chars} (max_output_chars)")
    return value


def _int_bits(value: Any) -> int:
    return abs(value).bit_length() if isinstance(value, int) else 0


def _check_binop(operator: str, left: Any, right: Any, limits: TemplateLimits) -> None:
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
        bits = right * _int_bits(left)
        if bits > limits.max_int_bits:
            raise LimitExceeded(f"{left} ** {right} has about {bits} bits, over {limits.max_int_bits} (max_int_bits)")
    elif operator == "*":
        if isinstance(left, int) and isinstance(right, int):
            bits = _int_bits(left) + _int_bits(right)
            if bits > limits.max_int_bits:
                raise LimitExceeded(f"a product of about {bits} bits is over {limits.max_int_bits} (max_int_bits)")
        else:
            sized, count = (left, right) if isinstance(right, int) else (right, left)
            size = _sized(sized)
            if size is not None and isinstance(count, int) and size * max(count, 0) > limits.max_output_chars:
                raise LimitExceeded(
                    f"repeating a value of length {size} {count} times is over {limits.max_output_chars} (max_output_chars)"
                )
    elif operator == "+":
        a, b = _sized(left), _sized(right)
        if a is not None and b is not None and a + b > limits.max_output_chars:
            raise LimitExceeded(
                f"joining values of length {a} and {b} is over {limits.max_output_chars} (max_output_chars)"
            )
    elif operator == "%" and isinstance(left, str):
        raise LimitExceeded("printf-style '%' formatting of strings is not allowed in templates (use ~ to join)")


#: Filters a parameter template may use; the rest (wordwrap, center, indent, batch, slice,
#: format, urlize, xmlattr, random, pprint...) can build huge values from small arguments.
SAFE_FILTERS = frozenset(
    """
    abs attr capitalize count d default dictsort e escape first float groupby int items join
    last length list lower map max min reject rejectattr replace reverse round safe select
    selectattr sort string sum title tojson trim truncate unique upper wordcount
    """.split()
)

#: Methods a template may call on a string.
SAFE_STR_METHODS = frozenset(
    """
    lower upper strip lstrip rstrip title capitalize casefold startswith endswith split rsplit
    splitlines partition rpartition find rfind index rindex count isdigit isalpha isalnum
    isspace islower isupper isnumeric isdecimal replace removeprefix removesuffix
    """.split()
)


def _check_str_attribute(obj: Any, attribute: str) -> None:
    if isinstance(obj, str) and hasattr(str, attribute) and attribute not in SAFE_STR_METHODS:
        raise LimitExceeded(f"string method '{attribute}' is not allowed in templates")


def _check_replace(text: str, old: Any, new: Any, limits: TemplateLimits) -> None:
    if isinstance(old, str) and isinstance(new, str):
        hits = text.count(old) if old else len(text) + 1
        size = len(text) + hits * max(0, len(new) - len(old))
        if size > limits.max_output_chars:
            raise LimitExceeded(f"replace would build a string of {size} characters, over {limits.max_output_chars}")


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        limits = tick().limits
        for arg in args:
            if isinstance(arg, str) and len(arg) > limits.max_filter_input_chars:
                raise LimitExceeded(
                    f"filter '{name}' applied to a string of {len(arg)} characters, over "
                    f"{limits.max_filter_input_chars} (max_filter_input_chars)"
                )
        if name == "replace":
            strings = [a for a in args if isinstance(a, str)]
            if len(strings) >= 3:
                _check_replace(strings[0], strings[1], strings[2], limits)
        return check_size(func(*args, **kwargs), f"the result of filter '{name}'")

    for attr in ("jinja_pass_arg",):  # keep Jinja's pass_context / pass_eval_context marker
        if hasattr(func, attr):
            setattr(call, attr, getattr(func, attr))
    return call


def _bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    for item in iterable:
        budget = tick()
        budget.iterations += 1
        if budget.iterations > budget.limits.max_loop_iterations:
            raise LimitExceeded(f"loops ran more than {budget.limits.max_loop_iterations} times (max_loop_iterations)")
        yield item


#: Internal filter names the tree rewrite inserts; template text naming them is refused at
#: parse time (`uses_reserved_names`), so only the rewrite can use them.
LOOP_FILTER = "_toolagent_loop"
CHECK_FILTER = "_toolagent_checked"


class BoundedEnvironment(SandboxedEnvironment):
    """A sandbox whose operations, calls, filters and loops are checked against the render's budget."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """Check the operation's result size before computing it."""
        _check_binop(operator, left, right, tick().limits)
        return check_size(super().call_binop(context, operator, left, right), f"the result of '{operator}'")

    def getattr(self, obj: Any, attribute: str) -> Any:
        """Refuse string attributes outside `SAFE_STR_METHODS` (`center`, `format`, `ljust`...)."""
        _check_str_attribute(obj, attribute)
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        """`x['center']` is `x.center`: the same check as `getattr`."""
        if isinstance(argument, str):
            _check_str_attribute(obj, argument)
        return super().getitem(obj, argument)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """Check the deadline, allow only `SAFE_STR_METHODS` on strings, and bound their results."""
        limits = tick().limits
        bound_to = getattr(__obj, "__self__", None)
        if isinstance(bound_to, str) and callable(__obj):
            name = getattr(__obj, "__name__", "")
            if name not in SAFE_STR_METHODS:
                raise LimitExceeded(f"string method '{name}' is not allowed in templates")
            if name == "replace" and len(args) >= 2:
                _check_replace(bound_to, args[0], args[1], limits)
        return check_size(super().call(__context, __obj, *args, **kwargs), "a call's result")


def build_environment(finalize: Callable[[Any], Any]) -> BoundedEnvironment:
    """The environment parameter templates parse and render in (no globals, safe filters only).

    Args:
        finalize: how a value appears in rendered text.
    """
    env = BoundedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True, finalize=finalize
    )
    # No globals: `range`, `dict`, `lipsum`, `cycler`... are not needed by parameter templates.
    env.globals.clear()
    env.filters = {name: _bounded_filter(name, f) for name, f in env.filters.items() if name in SAFE_FILTERS}
    env.filters[LOOP_FILTER] = _bounded_loop
    env.filters[CHECK_FILTER] = lambda value: check_size(value, "a joined string")
    return env


_RESERVED = re.compile(r"_toolagent_")


def bound_tree(tree: nodes.Template) -> nodes.Template:
    """Route every loop's iterable and every `~` concatenation through the budget checks."""
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, LOOP_FILTER, [], [], None, None, lineno=loop.lineno)
    for concat in list(tree.find_all(nodes.Concat)):
        parent = _parent_of(tree, concat)
        if parent is None:
            continue
        checked = nodes.Filter(concat, CHECK_FILTER, [], [], None, None, lineno=concat.lineno)
        _replace_child(parent, concat, checked)
    return tree


def uses_reserved_names(source: str) -> bool:
    """True when template text names the internal filters (which only the rewrite may insert)."""
    return _RESERVED.search(source) is not None


def _parent_of(root: nodes.Node, target: nodes.Node) -> nodes.Node | None:
    stack: list[nodes.Node] = [root]
    while stack:
        node = stack.pop()
        for child in node.iter_child_nodes():
            if child is target:
                return node
            stack.append(child)
    return None


def _replace_child(parent: nodes.Node, old: nodes.Node, new: nodes.Node) -> None:
    for name in parent.fields:
        value = getattr(parent, name, None)
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
