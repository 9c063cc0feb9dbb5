"""Grading API: status codes, blind reads, adjudication and agreement."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.grading.conftest import DRAFT_TEXT, build_world

GOOD = {
    "factual_accuracy": "pass",
    "citation_relevance": 4,
    "tone": 4,
    "completeness": 4,
    "rationale": "fine",
}


def setup(session: Session, api_as: Callable[..., TestClient]):  # type: ignore[no-untyped-def]
    world = build_world(session)
    return (
        world,
        api_as("labeler", email="alice@example.test"),
        api_as("labeler", email="bob@example.test"),
        api_as("lead", email="lead@example.test"),
    )


class TestPostGrades:
    def test_created_then_conflict(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, _, _ = setup(session, api_as)
        r = alice.post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[0].id})
        assert r.status_code == 201, r.text
        assert r.json()["tone"] == 4 and r.json()["grader_id"] == w.alice.id
        again = alice.post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[0].id})
        assert again.status_code == 409 and "revise" in again.json()["detail"]

    def test_bad_score_names_field(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, _, _ = setup(session, api_as)
        r = alice.post("/api/v1/grades", json={**GOOD, "tone": 9, "draft_id": w.drafts[0].id})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "tone"
        r = alice.post(
            "/api/v1/grades", json={**GOOD, "factual_accuracy": "fail", "draft_id": w.drafts[0].id}
        )
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "unsupported_claim"
        r = alice.post("/api/v1/grades", json={**GOOD, "draft_id": "x"})
        assert r.status_code == 422 and r.json()["detail"][0]["field"] == "draft_id"

    def test_fail_with_quote_is_accepted(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, _, _ = setup(session, api_as)
        claim = DRAFT_TEXT.split(". ")[-1]
        r = alice.post(
            "/api/v1/grades",
            json={**GOOD, "factual_accuracy": "fail", "unsupported_claim": claim, "draft_id": w.drafts[0].id},
        )
        assert r.status_code == 201 and r.json()["unsupported_claim"] == claim

    def test_put_revises_own_and_refuses_others(
        self, session: Session, api_as: Callable[..., TestClient]
    ) -> None:
        w, alice, bob, _ = setup(session, api_as)
        gid = alice.post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[0].id}).json()["id"]
        r = alice.put(f"/api/v1/grades/{gid}", json={**GOOD, "tone": 3})
        assert r.status_code == 200 and r.json()["tone"] == 3
        assert bob.put(f"/api/v1/grades/{gid}", json=GOOD).status_code == 403
        assert alice.put("/api/v1/grades/9999", json=GOOD).status_code == 404

    def test_pm_cannot_grade(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w = build_world(session)
        assert (
            api_as("pm").post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[0].id}).status_code == 403
        )


class TestBlindRead:
    def test_403_until_graded_lead_always(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, bob, lead = setup(session, api_as)
        d = w.drafts[0].id
        alice.post("/api/v1/grades", json={**GOOD, "draft_id": d})
        assert bob.get(f"/api/v1/drafts/{d}/grades").status_code == 403
        seen = lead.get(f"/api/v1/drafts/{d}/grades")
        assert seen.status_code == 200 and len(seen.json()["grades"]) == 1
        bob.post("/api/v1/grades", json={**GOOD, "tone": 5, "draft_id": d})
        body = bob.get(f"/api/v1/drafts/{d}/grades").json()
        assert {g["grader_id"] for g in body["grades"]} == {w.alice.id, w.bob.id}
        assert [h["action"] for h in body["history"]] == ["create", "create"]


class TestAdjudicationApi:
    def test_open_list_and_resolve(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, bob, lead = setup(session, api_as)
        d = w.drafts[0].id
        alice.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 1})
        bob.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 5})
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
        final = lead.get(f"/api/v1/grading/runs/{w.run.id}/final-grades").json()
        assert final["counts"]["final"] == 1 and final["items"][0]["final_source"] == "adjudication"

    def test_return_for_rework(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        w, alice, bob, lead = setup(session, api_as)
        d = w.drafts[0].id
        alice.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 1})
        gid = bob.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 5}).json()["id"]
        adj_id = lead.get("/api/v1/adjudications").json()["items"][0]["id"]
        r = lead.post(
            f"/api/v1/adjudications/{adj_id}",
            json={"action": "return", "grade_id": gid, "comment": "check tone"},
        )
        assert r.status_code == 200 and r.json()["grade"]["status"] == "returned"
        assert lead.get("/api/v1/adjudications?status=rework").json()["items"][0]["id"] == adj_id

    def test_put_during_adjudication_is_409_until_returned(
        self, session: Session, api_as: Callable[..., TestClient]
    ) -> None:
        w, alice, bob, lead = setup(session, api_as)
        d = w.drafts[0].id
        ga = alice.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 1}).json()["id"]
        gb = bob.post("/api/v1/grades", json={**GOOD, "draft_id": d, "tone": 5}).json()["id"]
        r = bob.put(f"/api/v1/grades/{gb}", json={**GOOD, "tone": 1})
        assert r.status_code == 409, r.text
        assert "the lead decides or returns" in r.json()["detail"]
        assert lead.get("/api/v1/adjudications?status=open").json()["items"][0]["draft_id"] == d
        adj_id = lead.get("/api/v1/adjudications").json()["items"][0]["id"]
        lead.post(
            f"/api/v1/adjudications/{adj_id}", json={"action": "return", "grade_id": gb, "comment": "tone"}
        )
        assert alice.put(f"/api/v1/grades/{ga}", json={**GOOD, "tone": 5}).status_code == 409
        ok = bob.put(f"/api/v1/grades/{gb}", json={**GOOD, "tone": 1})
        assert ok.status_code == 200 and ok.json()["status"] == "submitted"
        assert lead.get("/api/v1/adjudications?status=dissolved").json()["items"][0]["id"] == adj_id


class TestAgreementApi:
    def test_same_numbers_as_service(self, session: Session, api_as: Callable[..., TestClient], spec) -> None:  # type: ignore[no-untyped-def]
        from webapp.grading.agreement import agreement_report

        w, alice, bob, lead = setup(session, api_as)
        for i, (ta, tb) in enumerate([(4, 4), (2, 5), (3, 4)]):
            alice.post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[i].id, "tone": ta})
            bob.post("/api/v1/grades", json={**GOOD, "draft_id": w.drafts[i].id, "tone": tb})
        body = api_as("pm").get("/api/v1/grading/agreement").json()
        session.expire_all()
        assert body["n_pairs"] == 3
        assert (
            body["disagreement_rate"]
            == agreement_report(session=session, spec=spec)["disagreement_rate"]
            == 1 / 3
        )
        assert alice.get("/api/v1/grading/agreement").status_code == 403
