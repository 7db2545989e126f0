"""Arguments checked against a tool's input schema before anything is sent."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ArgumentsInvalid, UpstreamError
from ..model.spec import ToolSpec

Quick = Callable[[dict[str, Any]], bool]
_VALIDATORS: dict[str, tuple[dict[str, Any], Any, Quick | None]] = {}

# Keywords that only annotate: they never make an instance invalid.
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$comment"})
# JSON type name -> the Python types that surely have it (a value of another type goes to jsonschema,
# which also knows that 1.0 is an integer).
_SURE_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}
_ANY_VALUE: tuple[type, ...] = ()


def _property_types(schema: Any) -> tuple[type, ...] | None:
    """The Python types a property of this schema surely accepts (`_ANY_VALUE`: any), or None when
    its schema says more than a type."""
    if not isinstance(schema, dict) or not set(schema) <= _ANNOTATIONS | {"type"}:
        return None
    kind = schema.get("type")
    if kind is None:
        return _ANY_VALUE
    kinds = [kind] if isinstance(kind, str) else kind
    if not isinstance(kinds, list) or not kinds or any(k not in _SURE_TYPES for k in kinds):
        return None
    return tuple(t for k in kinds for t in _SURE_TYPES[k])


def quick_check(schema: dict[str, Any]) -> Quick | None:
    """A check for the common shape of a tool's input or output schema (an object of typed
    properties, some required, maybe closed) that answers True only for a value the schema surely
    accepts; None when the schema uses anything else. Whatever it does not pass goes to jsonschema,
    which decides and names the fields: the check saves the general validator's walk on the hot
    path (arguments here, results in `checked_session.py`)."""
    if not set(schema) <= _ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}:
        return None
    if schema.get("type", "object") != "object":
        return None
    properties, required = schema.get("properties", {}), schema.get("required", [])
    closed = schema.get("additionalProperties", True)
    if not isinstance(properties, dict) or not isinstance(required, list) or closed not in (True, False):
        return None
    types = {name: _property_types(sub) for name, sub in properties.items()}
    if any(t is None for t in types.values()) or not all(isinstance(r, str) for r in required):
        return None
    open_ = closed is True

    def surely_valid(arguments: dict[str, Any]) -> bool:
        if type(arguments) is not dict or not all(r in arguments for r in required):
            return False
        for name, value in arguments.items():
            accepted = types.get(name)
            if accepted is None:
                if not open_:
                    return False
            elif accepted and type(value) not in accepted:
                return False
        return True

    return surely_valid


def _validator(spec: ToolSpec) -> tuple[Any, Quick | None]:
    # Building a validator costs far more than running it. Specs are cached per listing, so the
    # schema object itself identifies the version; a re-listed tool gets a fresh validator.
    hit = _VALIDATORS.get(spec.name)
    if hit is not None and hit[0] is spec.input_schema:
        return hit[1], hit[2]
    # Loaded on the first check, not with the tool stack: a command that calls no tool (a listing,
    # the history) opens the stack without needing it, and jsonschema with what it loads costs
    # such a command a few percent of its run.
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(spec.input_schema)
        cls.check_schema(spec.input_schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise UpstreamError(f"tool '{spec.name}' declares an invalid input schema: {exc.message}") from exc
    validator, quick = cls(spec.input_schema), quick_check(spec.input_schema)
    _VALIDATORS[spec.name] = (spec.input_schema, validator, quick)
    return validator, quick


def check_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """Validate arguments against the tool's input schema, naming each bad field.

    Raises:
        ArgumentsInvalid: with every violation, e.g. "`max_rows`: 'ten' is not of type 'integer'".
    """
    validator, quick = _validator(spec)
    if quick is not None and quick(arguments):
        return
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for e in errors[:10]:
            where = ".".join(str(p) for p in e.absolute_path)
            parts.append(f"`{where}`: {e.message}" if where else e.message)
        raise ArgumentsInvalid(f"arguments for '{spec.name}' do not match its input schema: " + "; ".join(parts))


__all__ = ["Quick", "check_arguments", "quick_check"]
