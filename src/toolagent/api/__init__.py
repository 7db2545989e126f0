"""The HTTP API: REST routes, tRPC procedures and the OpenAPI document, thin callers of the runtime (`app.create_app`)."""
