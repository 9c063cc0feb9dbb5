"""Fuzzing on the demo: schemathesis over the whole /api/v1 document for every kind of caller, and a walk of
every route (pages too) with out-of-range dates and numbers. No server error; only documented statuses."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.conftest import BACKENDS, SPEC_PATH, TEST_SECRET, DemoTemplate
from tests.fuzz_support import CALLERS, FuzzTarget, api_operations, demo_target, fuzz_operation
from tests.test_route_security import _routes
from webapp.core.spec import EvalSpec
from webapp.web.api_docs import OPENAPI_URL

# Each test here takes more than a few seconds (see docs/development.md: running subsets).
pytestmark = pytest.mark.slow


# Examples per operation (each sent as every caller): bounded so the suite stays fast; the
# benchmark-style script benchmarks/fuzz_api.py runs many more.
MAX_EXAMPLES = int(os.environ.get("DRAFTDESK_FUZZ_EXAMPLES", "4"))


@pytest.fixture(scope="module", params=BACKENDS)
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, demo_template: DemoTemplate, spec: EvalSpec) -> Iterator[FuzzTarget]:
    """A copy of the seeded demo for this module, on each configured backend."""
    url = demo_template.copy(request.param, tmp_path_factory.mktemp("fuzz"))
    target = demo_target(url, TEST_SECRET, SPEC_PATH, spec)
    yield target
    target.app.state.engine.dispose()


def test_api_as_every_caller(demo: FuzzTarget) -> None:
    operations = api_operations(demo.app)
    # Every operation of the document is fuzzed: one per /api/v1 route and method.
    api_routes = [(m, p) for m, p, _ in _routes(demo.app) if p.startswith("/api/v1/")]
    assert sorted((op.method.upper(), op.path) for op in operations) == sorted(api_routes)
    failures = [f for op in operations for f in fuzz_operation(op, demo, max_examples=MAX_EXAMPLES)]
    assert failures == [], "\n\n".join(failures)


def test_the_checks_catch_an_answer_that_breaks_its_schema() -> None:
    # The conformance checks are not vacuous: an operation whose answer lacks a declared field, and
    # one answering a status it does not document, both fail.
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse
    from pydantic import BaseModel

    class Thing(BaseModel):
        id: int
        name: str

    app = FastAPI(openapi_url=OPENAPI_URL)

    @app.get("/api/v1/thing", response_model=Thing)
    def thing() -> JSONResponse:
        return JSONResponse({"id": "not a number"})

    @app.get("/api/v1/teapot", response_model=Thing)
    def teapot() -> JSONResponse:
        return JSONResponse({"id": 1, "name": "x"}, status_code=418)

    target = FuzzTarget(app=app, headers=dict.fromkeys(CALLERS, {}))
    failures = {op.path: fuzz_operation(op, target, max_examples=1) for op in api_operations(app)}
    assert "Response violates schema" in failures["/api/v1/thing"][0]
    assert "Undocumented status code" in failures["/api/v1/teapot"][0] and "418" in failures["/api/v1/teapot"][0]


def test_answers_sent_without_validation_conform_to_their_models(demo: FuzzTarget) -> None:
    # /events and /metrics/daily answer with JSON they build themselves (FastAPI does not validate
    # it against the model on the way out): hold a real answer of each to its model, field by field.
    from pydantic import TypeAdapter

    from webapp.metrics.schemas import DayMetricsPublic, EventResult, IngestPublic

    client = TestClient(demo.app, headers=demo.headers["all_roles"])
    days = client.get("/api/v1/metrics/daily", params={"start": "2026-01-01", "end": "2026-12-31"}).json()
    assert len(days) == 365
    TypeAdapter(list[DayMetricsPublic]).validate_python(days)
    assert all(set(d) == set(DayMetricsPublic.model_fields) for d in days)
    assert any(d["accept_rate"] is not None for d in days)  # the demo has events

    good = {"event_id": "schema-1", "ticket_id": "t-1", "occurred_at": "2026-11-02T12:00:00+00:00", "intent": "billing_charge",
            "draft_shown": True, "action": "accept", "draft_text": "Hi", "sent_text": "Hi", "escalated": False}
    ingest = client.post("/api/v1/events", json=[good, good, {"event_id": "schema-2"}], headers=demo.headers["ingest"])
    assert ingest.status_code == 200, ingest.text
    body = IngestPublic.model_validate(ingest.json())
    assert [r.status for r in body.results] == ["created", "duplicate", "invalid"]
    assert (body.created, body.duplicate, body.invalid) == (1, 1, 1)
    assert all(set(r) <= set(EventResult.model_fields) for r in ingest.json()["results"])
    assert body.results[2].field and body.results[2].errors


# --- every route, out-of-range values ------------------------------------------------------------

OUT_OF_RANGE: dict[str, tuple[str, ...]] = {
    "date": ("2760-01-10", "0001-01-01", "9999-12-31"),
    "int": ("99999999999999999999", "-1", "2147483648"),
    "float": ("1e308", "-1e308", "nan"),
    "str": ("x" * 3000, "%00", "1"),
}


def _kind(annotation: object) -> str:
    return next((kind for kind in ("date", "int", "float") if kind in str(annotation)), "str")


def test_every_route_answers_out_of_range_values_with_a_4xx(demo: FuzzTarget) -> None:
    client = TestClient(demo.app, raise_server_exceptions=False, headers=demo.headers["all_roles"])
    documented = TestClient(demo.app).get(OPENAPI_URL).json()["paths"]
    failures: list[str] = []
    calls = 0
    for method, path, route in _routes(demo.app):
        path_params = route.dependant.path_params
        params = [*path_params, *route.dependant.query_params]
        for param in params:
            for value in OUT_OF_RANGE[_kind(param.field_info.annotation)]:
                # the other path parameters are "1"
                url = path.replace("{" + param.name + "}", value) if param in path_params else path
                query = {param.alias: value} if param in route.dependant.query_params else {}
                body = {} if method in ("POST", "PUT", "PATCH") and path.startswith("/api/") else None
                r = client.request(method, re.sub(r"\{[^}]+\}", "1", url), params=query, json=body, follow_redirects=False)
                calls += 1
                allowed = documented.get(path, {}).get(method.lower(), {}).get("responses")
                if r.status_code >= 500 or (allowed is not None and str(r.status_code) not in allowed):
                    failures.append(f"{method} {path} {param.name}={value[:20]} -> {r.status_code} {r.text[:120]}")
    assert calls > 100
    assert failures == []
