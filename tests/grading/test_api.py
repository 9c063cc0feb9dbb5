"""Grading API: status codes, blind reads, adjudication and agreement."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlmodel import Session

from tests.grading.conftest import DRAFT_TEXT, GradingWorld
from webapp.core.spec import EvalSpec
from webapp.grading.agreement import agreement_report

GOOD = {"factual_accuracy": "pass", "citation_relevance": 4, "tone": 4, "completeness": 4, "rationale": "ok"}


@pytest.fixture
def clients(world: GradingWorld, api_as: Callable[..., TestClient]) -> tuple[TestClient, ...]:
    """Alice's, Bob's and the lead's API clients."""
    people = (("labeler", "alice"), ("labeler", "bob"), ("lead", "lead"))
    return tuple(api_as(role, email=f"{name}@example.test") for role, name in people)


def post_grade(c: TestClient, draft_id: Any, **kw: Any) -> Response:
    return c.post("/api/v1/grades", json={**GOOD, "draft_id": draft_id, **kw})


class TestPostGrades:
    def test_created_then_conflict(
        self, world: GradingWorld, clients: tuple[TestClient, ...], api_as: Callable[..., TestClient]
    ) -> None:
        alice, d = clients[0], world.drafts[0].id
        assert post_grade(api_as("pm"), d).status_code == 403  # a PM cannot grade
        r = post_grade(alice, d)
        assert r.status_code == 201, r.text
        assert r.json()["tone"] == 4 and r.json()["grader_id"] == world.alice.id
        again = post_grade(alice, d)
        assert again.status_code == 409 and "revise" in again.json()["detail"]

    def test_bad_score_names_field_and_a_quoted_fail_is_accepted(
        self, world: GradingWorld, clients: tuple[TestClient, ...]
    ) -> None:
        bad: list[tuple[dict[str, Any], str]] = [
            ({"tone": 9}, "tone"),
            ({"factual_accuracy": "fail"}, "unsupported_claim"),
            ({"draft_id": "x"}, "draft_id"),
        ]
        for kw, field in bad:
            r = post_grade(clients[0], **{"draft_id": world.drafts[0].id, **kw})
            assert r.status_code == 422 and r.json()["detail"][0]["field"] == field, kw
        claim = DRAFT_TEXT.split(". ")[-1]  # a fail that quotes the draft is accepted
        r = post_grade(clients[0], world.drafts[0].id, factual_accuracy="fail", unsupported_claim=claim)
        assert r.status_code == 201 and r.json()["unsupported_claim"] == claim

    def test_put_revises_own_and_refuses_others(
        self, world: GradingWorld, clients: tuple[TestClient, ...]
    ) -> None:
        alice, bob, _ = clients
        gid = post_grade(alice, world.drafts[0].id).json()["id"]
        r = alice.put(f"/api/v1/grades/{gid}", json={**GOOD, "tone": 3})
        assert r.status_code == 200 and r.json()["tone"] == 3
        assert bob.put(f"/api/v1/grades/{gid}", json=GOOD).status_code == 403
        assert alice.put("/api/v1/grades/9999", json=GOOD).status_code == 404


def test_403_until_graded_lead_always(world: GradingWorld, clients: tuple[TestClient, ...]) -> None:
    alice, bob, lead = clients
    d = world.drafts[0].id
    post_grade(alice, d)
    assert bob.get(f"/api/v1/drafts/{d}/grades").status_code == 403
    seen = lead.get(f"/api/v1/drafts/{d}/grades")
    assert seen.status_code == 200 and len(seen.json()["grades"]) == 1
    post_grade(bob, d, tone=5)
    body = bob.get(f"/api/v1/drafts/{d}/grades").json()
    assert {g["grader_id"] for g in body["grades"]} == {world.alice.id, world.bob.id}
    assert [h["action"] for h in body["history"]] == ["create", "create"]


class TestAdjudicationApi:
    def test_open_list_and_resolve(self, world: GradingWorld, clients: tuple[TestClient, ...]) -> None:
        alice, bob, lead = clients
        d = world.drafts[0].id
        post_grade(alice, d, tone=1)
        post_grade(bob, d, tone=5)
        assert alice.get("/api/v1/adjudications").status_code == 403
        items = lead.get("/api/v1/adjudications?status=open").json()["items"]
        assert len(items) == 1 and {g["tone"] for g in items[0]["grades"]} == {1, 5}
        adj_id = items[0]["id"]
        bad = lead.post(f"/api/v1/adjudications/{adj_id}", json={**GOOD, "note": ""})
        assert bad.status_code == 422 and bad.json()["detail"][0]["field"] == "note"
        ok = lead.post(f"/api/v1/adjudications/{adj_id}", json={**GOOD, "tone": 3, "note": "stiff but fine"})
        assert ok.status_code == 200 and ok.json()["final"]["tone"] == 3.0
        assert lead.get("/api/v1/adjudications?status=open").json()["items"] == []
        assert lead.post(f"/api/v1/adjudications/{adj_id}", json={**GOOD, "note": "again"}).status_code == 409
        final = lead.get(f"/api/v1/grading/runs/{world.run.id}/final-grades").json()
        assert final["counts"]["final"] == 1 and final["items"][0]["final_source"] == "adjudication"

    def test_put_during_adjudication_is_409_until_returned(
        self, world: GradingWorld, clients: tuple[TestClient, ...]
    ) -> None:
        alice, bob, lead = clients
        d = world.drafts[0].id
        ga = post_grade(alice, d, tone=1).json()["id"]
        gb = post_grade(bob, d, tone=5).json()["id"]
        r = bob.put(f"/api/v1/grades/{gb}", json={**GOOD, "tone": 1})
        assert r.status_code == 409, r.text
        assert "the lead decides or returns" in r.json()["detail"]
        assert lead.get("/api/v1/adjudications?status=open").json()["items"][0]["draft_id"] == d
        adj_id = lead.get("/api/v1/adjudications").json()["items"][0]["id"]
        back = {"action": "return", "grade_id": gb, "comment": "check tone"}
        r = lead.post(f"/api/v1/adjudications/{adj_id}", json=back)
        assert r.status_code == 200 and r.json()["grade"]["status"] == "returned"
        assert lead.get("/api/v1/adjudications?status=rework").json()["items"][0]["id"] == adj_id
        assert alice.put(f"/api/v1/grades/{ga}", json={**GOOD, "tone": 5}).status_code == 409
        ok = bob.put(f"/api/v1/grades/{gb}", json={**GOOD, "tone": 1})
        assert ok.status_code == 200 and ok.json()["status"] == "submitted"
        assert lead.get("/api/v1/adjudications?status=dissolved").json()["items"][0]["id"] == adj_id


def test_same_numbers_as_service(
    session: Session, spec: EvalSpec, world: GradingWorld, clients: tuple[TestClient, ...],
    api_as: Callable[..., TestClient],
) -> None:
    alice, bob, _ = clients
    for i, (ta, tb) in enumerate([(4, 4), (2, 5), (3, 4)]):
        post_grade(alice, world.drafts[i].id, tone=ta)
        post_grade(bob, world.drafts[i].id, tone=tb)
    body = api_as("pm").get("/api/v1/grading/agreement").json()
    session.expire_all()
    assert body["n_pairs"] == 3
    rate = agreement_report(session=session, spec=spec).disagreement_rate
    assert body["disagreement_rate"] == rate == 1 / 3
    assert alice.get("/api/v1/grading/agreement").status_code == 403
