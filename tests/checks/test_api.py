"""JSON API of the checks: the same numbers as the service, re-checking, roles."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import World
from webapp.checks import service
from webapp.core.spec import EvalSpec


def test_run_checks_json_matches_the_service(
    session: Session, spec: EvalSpec, world: World, api_as: Callable[..., TestClient]
) -> None:
    service.check_run(session=session, spec=spec, run_id=world.a.id)
    session.commit()
    r = api_as("support_lead").get("/api/v1/runs/run-a/checks")
    assert r.status_code == 200
    data = r.json()
    assert data["overall"] == {"passed": 6, "failed": 2, "total": 8, "pass_rate": pytest.approx(0.75)}
    by_key = {c["key"]: c for c in data["per_check"]}
    assert by_key["citations_current"]["pass_rate"] == pytest.approx(5 / 6)
    assert data["per_category"]["routine"]["pass_rate"] == pytest.approx(0.75)
    assert data["per_intent"]["account_security"] == {"passed": 1, "failed": 1, "total": 2, "pass_rate": 0.5}
    assert sorted(d["case_id"] for d in data["failing_drafts"]) == ["e1", "r2"]
    assert data["gate"]["passes"] is False


def test_recheck_by_api_needs_lead_pm_or_admin(
    client: TestClient, world: World, api_as: Callable[..., TestClient]
) -> None:
    assert client.get("/api/v1/runs/run-a/checks").status_code == 401  # anonymous
    assert api_as("labeler").post("/api/v1/runs/run-b/checks").status_code == 403
    r = api_as("pm").post(f"/api/v1/runs/{world.b.id}/checks")
    assert r.status_code == 200
    body = r.json()
    assert body["overall"]["passed"] == 5
    assert [a["kind"] for a in body["new_alerts"]] == ["golden_check"]


def test_draft_checks_and_unknown_ids(session: Session, spec: EvalSpec, world: World, api_as: Callable[..., TestClient]) -> None:
    result = service.check_run(session=session, spec=spec, run_id=world.a.id)
    session.commit()
    e1 = next(o for o in result.summary.outcomes if o.case_id == "e1")
    client = api_as("pm")
    data = client.get(f"/api/v1/drafts/{e1.draft_id}/checks").json()
    assert data["passed"] is False and data["signals_hidden"] is False
    fallback = next(x for x in data["results"] if x["key"] == "low_confidence_fallback")
    assert fallback["status"] == "fail"
    assert client.get("/api/v1/drafts/99999/checks").status_code == 404
    assert client.get("/api/v1/runs/nope/checks").status_code == 404

