"""Arguments checked against a tool's input schema before anything is sent."""

from __future__ import annotations

from typing import Any

import jsonschema

from ..errors import ArgumentsInvalid, UpstreamError
from ..tools.spec import ToolSpec

_VALIDATORS: dict[str, tuple[dict[str, Any], Any]] = {}


def _validator(spec: ToolSpec) -> Any:
    # Building a validator costs far more than running it. Specs are cached per listing, so the
    # schema object itself identifies the version; a re-listed tool gets a fresh validator.
    hit = _VALIDATORS.get(spec.name)
    if hit is not None and hit[0] is spec.input_schema:
        return hit[1]
    try:
        cls = jsonschema.validators.validator_for(spec.input_schema)
        cls.check_schema(spec.input_schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise UpstreamError(f"tool '{spec.name}' declares an invalid input schema: {exc.message}") from exc
    validator = cls(spec.input_schema)
    _VALIDATORS[spec.name] = (spec.input_schema, validator)
    return validator


def check_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """Validate arguments against the tool's input schema, naming each bad field.

    Raises:
        ArgumentsInvalid: with every violation, e.g. "`max_rows`: 'ten' is not of type 'integer'".
    """
    errors = sorted(_validator(spec).iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if errors:
        parts = []
        for e in errors[:10]:
            where = ".".join(str(p) for p in e.absolute_path)
            parts.append(f"`{where}`: {e.message}" if where else e.message)
        raise ArgumentsInvalid(f"arguments for '{spec.name}' do not match its input schema: " + "; ".join(parts))


__all__ = ["check_arguments"]
