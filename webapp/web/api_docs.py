"""The OpenAPI document: the JSON API under /api/v1 only, with every error status a route can answer.

Every route declares its answer's model (`response_model`, or `responses=` with the media type of a
CSV/JSONL download); FastAPI documents it and 422. The app's own failures (401 without a valid session or token,
403 without the role, 404 for an unknown id in the path, 413 for a body over its limit, 422 in
the app's `{"detail": ...}` shape) are added here for every operation they apply to, so clients
and the schemathesis tests hold the API to the statuses it documents.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from webapp.web.api_schemas import ErrorPublic

API_PREFIX = "/api/v1"
OPENAPI_URL = "/api/openapi.json"
DOCS_URL = "/api/docs"
# A JSON object of the OpenAPI document, as FastAPI's get_openapi types it (its schemas are open-ended JSON).
OpenAPI = dict[str, Any]


def error_schemas() -> OpenAPI:
    """Return the JSON schema of the error body (webapp.web.api_schemas.ErrorPublic) as named components."""
    schema = ErrorPublic.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    return {**defs, "Error": {**schema, "title": "Error"}}


_ERROR_REF = {"$ref": "#/components/schemas/Error"}


def error_response(description: str) -> OpenAPI:
    """Return an OpenAPI response whose body is the app's error shape (for a route's `responses=`)."""
    return {"description": description, "content": {"application/json": {"schema": _ERROR_REF}}}


def _document_errors(op: OpenAPI) -> None:
    """Add the app-wide error statuses that apply to one operation."""
    responses = op.setdefault("responses", {})
    params = op.get("parameters", [])
    responses.setdefault("401", error_response("No valid session or bearer token"))
    responses.setdefault("403", error_response("The caller lacks the role or scope (or a CSRF token, for a session)"))
    if any(p.get("in") == "path" for p in params):
        responses.setdefault("404", error_response("Nothing with that id"))
    if "requestBody" in op:
        responses.setdefault("400", error_response("The body cannot be parsed (not UTF-8 or not JSON)"))
        responses.setdefault("413", error_response("Request body over its size limit"))
    if params or "requestBody" in op:
        responses["422"] = error_response("Invalid parameter or body (field and message), or a value out of range")


def build(app: FastAPI) -> OpenAPI:
    """Return the OpenAPI document of the /api/v1 routes with their error statuses."""
    schema = get_openapi(title=app.title, version=app.version, routes=app.routes, description="Draft Desk JSON API")
    schema["paths"] = {p: ops for p, ops in schema.get("paths", {}).items() if p.startswith(API_PREFIX + "/")}
    for ops in schema["paths"].values():
        for op in ops.values():
            _document_errors(op)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(error_schemas())
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def install(app: FastAPI) -> None:
    """Make app.openapi() return the document built by `build` (once, then cached)."""

    def openapi() -> OpenAPI:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi
