"""The argument check's fast path agrees with jsonschema: it passes only what the schema accepts."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from toolagent.errors import ArgumentsInvalid
from toolagent.mcp import arguments
from toolagent.mcp.arguments import check_arguments
from toolagent.model.spec import ToolSpec

# What FastMCP and the TypeScript SDK generate, and variants the fast path must decline or handle.
SCHEMAS: list[dict[str, Any]] = [
    {
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "echoArguments",
        "type": "object",
    },
    {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "x": {"type": "number"}, "ok": {"type": "boolean"}},
        "required": ["n"],
        "additionalProperties": False,
        "$schema": "http://json-schema.org/draft-07/schema#",
    },
    {
        "type": "object",
        "properties": {
            "v": {"type": ["string", "null"]},
            "any": {},
            "items": {"type": "array"},
            "obj": {"type": "object"},
        },
    },
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}},  # a constraint: declined
    {"type": "object", "properties": {"s": {"type": "string", "enum": ["a", "b"]}}, "required": ["s"]},
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
]
VALUES: list[Any] = ["", "a", "b", 0, 1, -5, 1.0, 2.5, True, False, None, [], [1], {}, {"k": 1}]
NAMES = ["text", "n", "x", "ok", "v", "any", "items", "obj", "s", "a", "extra"]


def _spec(i: int, schema: dict[str, Any]) -> ToolSpec:
    return ToolSpec(name=f"t/quick_{i}", server="t", tool=f"quick_{i}", input_schema=schema)


def test_the_fast_path_covers_the_generated_schemas_and_declines_constraints() -> None:
    quick = [arguments.quick_check(s) for s in SCHEMAS]
    assert [q is not None for q in quick] == [True, True, True, False, False, False, False]


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_the_fast_path_never_passes_what_jsonschema_refuses(i: int) -> None:
    schema, rng = SCHEMAS[i], random.Random(i)
    quick = arguments.quick_check(schema)
    validator = jsonschema.validators.validator_for(schema)(schema)
    passed = 0
    for _ in range(3000):
        args = {rng.choice(NAMES): rng.choice(VALUES) for _ in range(rng.randint(0, 4))}
        valid = not list(validator.iter_errors(args))
        if quick is not None and quick(args):
            passed += 1
            assert valid, args
        try:
            check_arguments(_spec(i, schema), args)
        except ArgumentsInvalid:
            assert not valid, args
        else:
            assert valid, args
    assert quick is None or passed > 5  # the corpus does reach the fast path


def test_a_bool_is_not_an_integer_and_a_float_integer_still_is() -> None:
    spec = _spec(99, {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    with pytest.raises(ArgumentsInvalid, match="`n`: True is not of type 'integer'"):
        check_arguments(spec, {"n": True})
    check_arguments(spec, {"n": 3.0})  # jsonschema's answer: an integral number is an integer
