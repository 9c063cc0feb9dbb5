"""Every /api/v1 route declares what it answers: a response model, or the media type of its download."""

from __future__ import annotations

import inspect
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import BaseModel

from tests.test_route_security import _routes
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.core.spec import METRIC_NAMES
from webapp.metrics.schemas import DayMetricsPublic
from webapp.web.api_docs import API_PREFIX, OPENAPI_URL

JSON = "application/json"


@pytest.fixture(scope="module")
def app() -> Any:
    return create_app(Settings(database_url="sqlite://", mode="dev", secret_key="x" * 32))


def _api_routes(app: Any) -> list[tuple[str, str, APIRoute]]:
    return [(m, p, r) for m, p, r in _routes(app) if p.startswith(API_PREFIX + "/")]


def _non_json_media_types(route: APIRoute) -> set[str]:
    ok = route.responses.get(200, route.responses.get("200", {}))
    return {media for media in ok.get("content", {}) if media != JSON}


def _is_model(tp: Any) -> bool:
    """Tell whether a response type is a Pydantic model, a list of one, or a union of them (not a bare dict)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated or origin is list:
        return _is_model(args[0])
    if origin in (Union, UnionType):
        return all(_is_model(a) for a in args)
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _undeclared(routes: list[tuple[str, str, APIRoute]]) -> list[str]:
    """Return the routes whose answer has neither a model nor a non-JSON media type."""
    return [f"{m} {p}" for m, p, r in routes if not _is_model(r.response_model) and not _non_json_media_types(r)]


def test_every_api_route_declares_its_response_model(app: Any) -> None:
    routes = _api_routes(app)
    assert len(routes) > 25
    assert _undeclared(routes) == []
    # The walk must not pass vacuously: the same endpoint declared with a plain dict, or with no model, is caught.
    method, path, route = routes[0]
    as_dict = APIRoute(path, route.endpoint, methods=[method], response_model=dict[str, Any])
    bare = APIRoute(path, route.endpoint, methods=[method], response_model=None)
    assert _undeclared([(method, path, as_dict), (method, path, bare)]) == [f"{method} {path}"] * 2
    assert _undeclared([(method, path, route)]) == []


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def test_every_success_answer_has_a_named_shape_in_the_document(app: Any) -> None:
    doc = TestClient(app).get(OPENAPI_URL).json()
    vague: list[str] = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                if not status.startswith("2") or status == "204":
                    continue
                content = response.get("content", {})
                assert content, f"{method} {path} {status} has no content"
                for media, body in content.items():
                    schema = _resolve(doc, body["schema"])
                    if media != JSON:
                        assert schema == {"type": "string"}, f"{method} {path} {media}"
                        continue
                    if schema.get("type") == "array":
                        schema = _resolve(doc, schema["items"])
                    # A JSON answer is an object with named properties (or one of several such
                    # objects), not "any object".
                    for shape in [_resolve(doc, s) for s in schema.get("oneOf", [])] or [schema]:
                        if not shape.get("properties"):
                            vague.append(f"{method.upper()} {path} {status}: {shape}")
    assert vague == []


def test_the_document_is_the_json_api_only_and_every_error_has_the_error_body(app: Any) -> None:
    doc = TestClient(app).get(OPENAPI_URL).json()
    assert len(doc["paths"]) > 20 and [p for p in doc["paths"] if not p.startswith("/api/v1/")] == []
    error = doc["components"]["schemas"]["Error"]
    assert error["required"] == ["detail"]
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            assert {"401", "403"} <= set(op["responses"]), op["operationId"]
            for status, response in op["responses"].items():
                if status.startswith("4"):
                    schema = response["content"][JSON]["schema"]
                    assert schema == {"$ref": "#/components/schemas/Error"}, f"{method} {path} {status}"


def test_downloads_document_their_media_types(app: Any) -> None:
    doc = TestClient(app).get(OPENAPI_URL).json()
    final = doc["paths"]["/api/v1/grading/runs/{run}/final-grades"]["get"]["responses"]["200"]["content"]
    assert set(final) == {JSON, "text/csv", "application/x-ndjson"}
    compare = doc["paths"]["/api/v1/runs/compare"]["get"]["responses"]["200"]["content"]
    assert set(compare) == {JSON, "text/csv"}


def test_daily_metrics_model_names_every_metric_of_the_spec() -> None:
    # /metrics/daily answers with pre-serialized JSON (no validation on the way out): its model must
    # still name every metric the service writes.
    fields = set(DayMetricsPublic.model_fields)
    assert set(METRIC_NAMES) <= fields
    assert fields - set(METRIC_NAMES) == {
        "day", "events", "drafts_shown", "target_met", "all_targets_met", "updating", "updating_since", "pending_events",
    }


# Issue 40 item 5: the document is written for its readers. Who calls an operation is said by naming them.
CALLERS = ("team", "lead", "PM", "labeler", "grader", "admin", "CI", "agent", "caller", "Any")


def _unwritten(doc: dict[str, Any], routes: dict[tuple[str, str], APIRoute]) -> list[str]:
    """Return what an operation lacks: its own summary and description (naming who calls it), its error answers."""
    problems: list[str] = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            name, route = f"{method.upper()} {path}", routes[(method.upper(), path)]
            docstring = inspect.cleandoc(route.endpoint.__doc__ or "")
            if not route.summary or op.get("summary") != route.summary:
                problems.append(f"{name}: no summary of its own")
            description = op.get("description") or ""
            if not description or description == docstring or not any(c in description for c in CALLERS):
                problems.append(f"{name}: no description saying who calls it and why")
            statuses = set(op["responses"])
            wanted = {"401", "403"}
            wanted |= {"404"} if "{" in path else set()
            wanted |= {"422"} if op.get("parameters") or "requestBody" in op else set()
            if missing := wanted - statuses:
                problems.append(f"{name}: error answers not listed: {sorted(missing)}")
            for status, response in op["responses"].items():
                if status.startswith("4") and not response.get("description"):
                    problems.append(f"{name}: {status} has no description")
    return problems


def test_every_operation_has_a_summary_a_description_and_its_error_answers(app: Any) -> None:
    doc = app.openapi()
    routes = {(m, p): r for m, p, r in _api_routes(app)}
    assert len(doc["paths"]) > 30
    assert _unwritten(doc, routes) == []
    # The pipeline's conflicts are listed with the error body.
    runs = doc["paths"]["/api/v1/runs"]["post"]["responses"]
    drafts = doc["paths"]["/api/v1/runs/{run}/drafts"]["post"]["responses"]
    assert {"200", "201", "409", "422"} <= set(runs) and {"200", "201", "404", "409", "413", "422"} <= set(drafts)
    error = doc["components"]["schemas"]["Error"]["properties"]
    assert "errors_total" in error and len(error["detail"]["anyOf"]) == 3


def test_an_operation_without_its_own_words_is_caught(app: Any) -> None:
    doc = app.openapi()
    routes = {(m, p): r for m, p, r in _api_routes(app)}
    method, path = "GET", "/api/v1/runs"
    bare = APIRoute(path, routes[(method, path)].endpoint, methods=[method], response_model=list[Any])
    op = {**doc["paths"][path]["get"], "summary": "Api Runs", "description": inspect.cleandoc(bare.endpoint.__doc__ or "")}
    op["responses"] = {k: v for k, v in op["responses"].items() if k != "403"}
    found = _unwritten({"paths": {path: {"get": op}}}, {(method, path): bare})
    assert found == [
        "GET /api/v1/runs: no summary of its own",
        "GET /api/v1/runs: no description saying who calls it and why",
        "GET /api/v1/runs: error answers not listed: ['403']",
    ]
