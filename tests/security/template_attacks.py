"""Templates that must end with a `TemplateError` naming a bound, as data: `(template, words)`.

Each renders against `PAYLOAD`; the refusal comes at parse time (unknown filter, source too
long) or during the render (a bound reached). Add a line to add an attack.
"""

from __future__ import annotations

#: The context every attack renders against.
PAYLOAD = {
    "x": "abcdefghij",
    "a": "a" * 20,
    "big": "y" * 200_000,
    "mid": "z" * 100_000,
    "list": list(range(100)),
    "n": 10,
}

_NESTED_LOOPS = (
    "{% for a in payload.list %}{% for b in payload.list %}{% for c in payload.list %}"
    "{% endfor %}{% endfor %}{% endfor %}"
)
_DOUBLING = "{% set s = payload.x %}" + "{% set s = s ~ s %}" * 40 + "{{ s|length }}"

TEMPLATE_ATTACKS: list[tuple[str, str]] = [
    ("{{ (payload.x * 300000)|wordwrap(1)|length }}", "No filter named 'wordwrap'"),
    ("{{ (payload.x * 300000)|length }}", "max_output_chars"),
    ("{{ (payload.x * 90000)|wordwrap(1)|length }}", "wordwrap"),
    ("{{ payload.x * 10**9 }}", "max_output_chars"),
    ("{{ (payload.list * 10**7)|length }}", "max_output_chars"),
    ("{{ 2**100000 }}", "max_int_bits"),
    ("{{ (2**4000) * (2**4000) }}", "max_int_bits"),
    ("{{ payload.n ** (payload.n ** payload.n) }}", "max_int_bits"),
    (_NESTED_LOOPS, "max_loop_iterations"),
    ("{% for a in payload.list %}{{ payload.mid }}{% endfor %}", "max_output_chars"),
    (_DOUBLING, "max_output_chars"),
    ("{{ '%0999999999d' % 1 }}", "'%' formatting"),
    ("{% set s = payload.x %}{{ s.center(10**9) }}", "string method 'center'"),
    ("{% set s = payload.x %}{{ s['ljust'](10**9) }}", "string method 'ljust'"),
    ("{{ 'x'.zfill(10**9) }}", "string method 'zfill'"),
    ("{{ '{:>999999999}'.format(1) }}", "string method 'format'"),
    ("{% set s = payload.a %}{{ s.replace('a', payload.x * 90000) }}", "replace would build"),
    ("{{ payload.a|replace('a', payload.x * 9000) }}", "replace would build"),
    ("{{ payload.a|replace('a', payload.x * 90000) }}", "max_filter_input_chars"),
    ("{{ payload.big|upper }}", "max_filter_input_chars"),
    ("{{ payload.x|center(999999999) }}", "center"),
    ("{{ payload.list|batch(999999999, 0)|list }}", "batch"),
    ("{{ payload.x|indent(999999999) }}", "indent"),
    ("{{ payload.x|format(1) }}", "format"),
    ("{{ payload.x }}" + " " * 10_001, "over the limit of 10000"),
    ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "recursed too deeply"),
    ("{{ payload.x|_toolagent_loop }}", "reserved name"),
]

#: `(text, rendered)`: `<<` that is not a reference stays text; `\\<<` is a literal `<<`.
ANGLE_TEXT: list[tuple[str, str]] = [
    ("select 1 << 4", "select 1 << 4"),
    ("select a >> b from t", "select a >> b from t"),
    ("select '10.0.0.0/8'::inet >> inet '10.1.0.0/16'", "select '10.0.0.0/8'::inet >> inet '10.1.0.0/16'"),
    ("select x << 2 from t where y >> 3", "select x << 2 from t where y >> 3"),
    ("select x << 2 from t where y >> 3 and id = <<payload.n>>", "select x << 2 from t where y >> 3 and id = 10"),
    ("select int8range(1, 5) << int8range(<<payload.n>>, 20)", "select int8range(1, 5) << int8range(10, 20)"),
    ("select a <<b and c>> d", "select a <<b and c>> d"),
    ("select '<<not a ref>>'", "select '<<not a ref>>'"),
    ("\\<<payload.n>>", "<<payload.n>>"),
    ("n=<<payload.n>> literal=\\<<payload.n>>", "n=10 literal=<<payload.n>>"),
    ("keep \\<< alone", "keep << alone"),
]
