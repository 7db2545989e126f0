"""`/docs`: Swagger UI served from the package, so the docs work with no internet.

FastAPI's default page loads Swagger UI from a CDN, which an offline or firewalled machine
cannot reach; here the page, its script, its stylesheet and its icon all come from this app.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
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


__all__ = ["STATIC_DIR", "STATIC_URL", "install_docs"]
