"""What the REST routers share: their documented error answers, the path parameters they have in
common, the process-wide services of a request, and the 400 naming each invalid field of a
definition."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Request
from fastapi.responses import JSONResponse

from ..errors import DefinitionInvalid
from .errors import error_body
from .procedure_models import ErrorOutput
from .services import Services

OrgPath = Annotated[str, Path(min_length=1, max_length=200, description="Organization slug, e.g. `demo`.")]
SlugPath = Annotated[str, Path(min_length=1, max_length=200, description="Agent slug, e.g. `supabase-agent`.")]


#: A route's `responses=`: FastAPI's own type, so entries keyed by status code and by "4XX" merge.
Responses = dict[int | str, dict[str, Any]]


def error_response(description: str) -> dict[str, Any]:
    """An OpenAPI `responses` entry: the error body's shape and `description`."""
    return {"model": ErrorOutput, "description": description}


#: The answers every authenticated route may give.
AUTH_RESPONSES: Responses = {
    401: error_response("Missing, unknown or revoked API key"),
    "4XX": error_response("Any other client error (same shape)"),
}
#: The answer of a route whose input is checked field by field.
INPUT_RESPONSES: Responses = {400: error_response("Invalid input: `error.details` names each invalid field")}


def services(request: Request) -> Services:
    """The process-wide services."""
    svc: Services = request.app.state.services  # set once, when the app starts
    return svc


def invalid_definition(exc: DefinitionInvalid, prefix: str, *, strip: str | None = None) -> JSONResponse:
    """A 400 naming each problem's field (`prefix` + its path in the definition, less `strip`)."""
    fields = []
    for problem in exc.problems:
        path = problem.path
        if strip and path.startswith(strip):
            path = path[len(strip) :]
        fields.append(
            {"field": ".".join(p for p in (prefix, path) if p).replace(".[", "["), "message": problem.message}
        )
    message = "; ".join(f"{f['field'] or 'body'}: {f['message']}" for f in fields)
    return JSONResponse(error_body("BAD_REQUEST", message, fields), status_code=400)


__all__ = [
    "AUTH_RESPONSES",
    "INPUT_RESPONSES",
    "OrgPath",
    "Responses",
    "SlugPath",
    "error_response",
    "invalid_definition",
    "services",
]
