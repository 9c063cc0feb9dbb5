"""Fuzzing on the demo: schemathesis over the whole /api/v1 document for every kind of caller, and a walk of
every route (pages too) with out-of-range dates and numbers. No server error; only documented statuses."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from tests.conftest import BACKENDS, SPEC_PATH, TEST_SECRET, DemoTemplate
from tests.fuzz_support import FuzzTarget, api_operations, demo_target, fuzz_operation
from webapp.api_docs import OPENAPI_URL
from webapp.spec import EvalSpec

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
    assert len(operations) > 20
    failures = [f for op in operations for f in fuzz_operation(op, demo, max_examples=MAX_EXAMPLES)]
    assert failures == [], "\n\n".join(failures)


def test_openapi_document_is_the_json_api_only(demo: FuzzTarget) -> None:
    paths = TestClient(demo.app).get(OPENAPI_URL).json()["paths"]
    assert len(paths) > 20
    assert [p for p in paths if not p.startswith("/api/v1/")] == []
    for ops in paths.values():
        for op in ops.values():
            assert {"401", "403"} <= set(op["responses"]), op["operationId"]


# --- every route, out-of-range values ------------------------------------------------------------

OUT_OF_RANGE: dict[str, tuple[str, ...]] = {
    "date": ("2760-01-10", "0001-01-01", "9999-12-31"),
    "int": ("99999999999999999999", "-1", "2147483648"),
    "float": ("1e308", "-1e308", "nan"),
    "str": ("x" * 3000, "%00", "1"),
}


def _kind(annotation: object) -> str:
    text = str(annotation)
    if "date" in text:
        return "date"
    if "int" in text:
        return "int"
    if "float" in text:
        return "float"
    return "str"


def _api_routes(app) -> list[tuple[str, str, APIRoute]]:  # type: ignore[no-untyped-def]
    from tests.test_route_security import _routes

    return _routes(app)


def test_every_route_answers_out_of_range_values_with_a_4xx(demo: FuzzTarget) -> None:
    client = TestClient(demo.app, raise_server_exceptions=False, headers=demo.headers["all_roles"])
    documented = TestClient(demo.app).get(OPENAPI_URL).json()["paths"]
    failures: list[str] = []
    calls = 0
    for method, path, route in _api_routes(demo.app):
        params = [*route.dependant.path_params, *route.dependant.query_params]
        for param in params:
            for value in OUT_OF_RANGE[_kind(param.field_info.annotation)]:
                url = path
                query: dict[str, str] = {}
                for other in route.dependant.path_params:
                    url = url.replace("{" + other.name + "}", value if other is param else "1")
                if param in route.dependant.query_params:
                    query[param.alias] = value
                body = {} if method in ("POST", "PUT", "PATCH") and path.startswith("/api/") else None
                r = client.request(method, re.sub(r"\{[^}]+\}", "1", url), params=query, json=body, follow_redirects=False)
                calls += 1
                allowed = documented.get(path, {}).get(method.lower(), {}).get("responses")
                if r.status_code >= 500 or (allowed is not None and str(r.status_code) not in allowed):
                    failures.append(f"{method} {path} {param.name}={value[:20]} -> {r.status_code} {r.text[:120]}")
    assert calls > 100
    assert failures == []
