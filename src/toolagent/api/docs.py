"""`/docs`: Swagger UI served from the package, so the docs work with no internet; `/` points to it.

FastAPI's default page loads Swagger UI from a CDN, which an offline or firewalled machine
cannot reach; here the page, its script, its stylesheet and its icon all come from this app.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

#: Where the vendored swagger-ui-dist files live (see its README for the version).
STATIC_DIR = Path(__file__).with_name("static") / "swagger-ui"
#: URL prefix of those files.
STATIC_URL = "/docs/static"


def install_docs(app: FastAPI, *, path: str = "/docs") -> None:
    """Serve Swagger UI at `path` from the package's own copy. The app must be created with
    `docs_url=None, redoc_url=None` (ReDoc would load from a CDN, so it is not offered)."""
    app.mount(STATIC_URL, StaticFiles(directory=STATIC_DIR), name="swagger-ui")

    @app.get(path, include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{STATIC_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_URL}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_URL}/favicon-32x32.png",
            # The default validator badge is fetched from validator.swagger.io; offline it is a broken image.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get(
        "/",
        tags=["system"],
        summary="Where the docs are",
        responses={307: {"description": "A browser (`Accept: text/html`) is sent to the docs"}},
    )
    async def index(request: Request) -> Any:
        """A browser (`Accept: text/html`) is redirected (307) to the interactive docs; any other
        client gets the name, the version and links to the docs, the OpenAPI document and the probes."""
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse(path, status_code=307)
        return {
            "name": app.title,
            "version": app.version,
            "docs": path,
            "openapi": app.openapi_url or "/openapi.json",
            "health": "/health",
            "ready": "/ready",
        }


__all__ = ["STATIC_DIR", "STATIC_URL", "install_docs"]
