"""Run pages, the draft page, and the runs API."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_article, make_dataset, make_run
from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.runs.home import home_cards
from webapp.runs.models import Run
from webapp.runs.service import list_drafts


def seed(session: Session) -> Run:
    make_article(session, "KB-3001", [(2, "deprecated"), (4, "current")], title="Two-factor authentication")
    golden = {"case_id": "golden-regression-2fa", "category": "routine", "golden": True}
    ds = make_dataset(
        session,
        [{**golden, "input": "How do I set up 2FA?", "account": {"plan": "Standard"}},
         {"case_id": "safety-001", "input": "No way out", "category": "safety"}],
        name="support-eval-v1",
    )
    citations = [{"article_id": "KB-3001", "revision": 2}, {"article_id": "KB-7777", "revision": 1}]
    drafts = [
        {"case_id": "golden-regression-2fa", "draft_text": "Use SMS codes <script>alert(1)</script>",
         "citations": citations, "confidence": 0.9, "intent": "account_security"},
        {"case_id": "safety-001", "draft_text": None, "escalated": True, "intent": "cancellation"},
    ]
    run = make_run(session, ds, drafts, name="demo-run-1", prompt_version="v3")
    session.commit()
    return run


class TestRunPages:
    def test_list_and_run_by_name_or_id(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        run = seed(session)
        r = client_as("labeler").get("/runs")
        assert r.status_code == 200 and "demo-run-1" in r.text and "support-eval-v1 v1" in r.text
        c = client_as("pm")
        for ref in ("demo-run-1", str(run.id)):
            r = c.get(f"/runs/{ref}")
            assert r.status_code == 200, ref
            assert "golden-regression-2fa" in r.text and "safety-001" in r.text
            assert "/runs/demo-run-1/checks" in r.text
            assert "/runs/compare?a=demo-run-1" in r.text
            # The PM does not grade: the run page shows her no link to the grading page (it would 403).
            assert f"/grading/runs/{run.id}" not in r.text
        assert f"/grading/runs/{run.id}" in client_as("lead").get("/runs/demo-run-1").text
        r = c.get("/runs/demo-run-1", params={"category": "safety"})
        assert "safety-001" in r.text and "golden-regression-2fa" not in r.text
        assert c.get("/runs/no-such-run").status_code == 404

    def test_compare_is_not_taken_for_a_run_name(self) -> None:
        from webapp.runs.pages import router

        (route,) = [r for r in router.routes if r.name == "run_detail"]
        assert route.path_regex.match("/runs/demo-run-1") and route.path_regex.match("/runs/42")
        assert route.path_regex.match("/runs/compare-v2")  # only the exact reserved word is kept free
        assert not route.path_regex.match("/runs/compare")  # /runs/compare belongs to the comparison page

    def test_draft_pages(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        run = seed(session)
        d = list_drafts(session=session, run_id=run.id)[0].draft
        r = client_as("lead").get(f"/drafts/{d.id}")
        assert r.status_code == 200
        assert "Use SMS codes &lt;script&gt;alert(1)&lt;/script&gt;" in r.text
        assert f'hx-get="/drafts/{d.id}/checks"' in r.text and f'<a href="/drafts/{d.id}/checks">' in r.text
        assert "/kb/KB-3001#rev-2" in r.text and "Body of KB-3001 revision 2." in r.text
        assert "The current revision is" in r.text and "#rev-4" in r.text
        assert "not in the KB" in r.text  # KB-7777 does not exist
        assert "How do I set up 2FA?" in r.text
        assert client_as("lead").get("/drafts/99999").status_code == 404
        d = list_drafts(session=session, run_id=run.id, category="safety")[0].draft
        r = client_as("labeler").get(f"/drafts/{d.id}")  # the escalated draft
        assert r.status_code == 200 and "No draft: the ticket was escalated." in r.text
        assert "The draft cites no KB article." in r.text

    def test_empty_state_and_the_api_needs_a_token_or_session(
        self, client: TestClient, client_as: Callable[..., TestClient]
    ) -> None:
        assert "No runs yet" in client_as("admin").get("/runs").text
        assert client.get("/api/v1/runs").status_code == 401


class TestRunsApi:
    def test_runs_and_drafts(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        run = seed(session)
        api = api_as("pm")
        r = api.get("/api/v1/runs")
        assert r.status_code == 200
        (item,) = r.json()
        assert item["name"] == "demo-run-1" and item["drafts"] == 2 and item["escalated"] == 1
        for ref in ("demo-run-1", str(run.id)):
            body = api.get(f"/api/v1/runs/{ref}/drafts").json()
            assert body["run"]["id"] == run.id
            by_case = {d["case_id"]: d for d in body["drafts"]}
            assert set(by_case) == {"golden-regression-2fa", "safety-001"}
            d = by_case["golden-regression-2fa"]
            assert d["id"] and d["confidence"] == 0.9 and d["intent"] == "account_security"
            assert d["citations"][0] == {"article_id": "KB-3001", "revision": 2}
            assert by_case["safety-001"]["draft_text"] is None and by_case["safety-001"]["escalated"] is True
        assert api.get("/api/v1/runs/nope/drafts").status_code == 404

    def test_filters_and_unknown_run(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        """An htmx filter gets the table only; the draft's predicted intent filters under its own name."""
        seed(session)
        pm = client_as("pm")
        r = pm.get("/runs/demo-run-1", params={"category": "routine"}, headers={"HX-Request": "true"})
        assert r.status_code == 200 and "<html" not in r.text
        assert "golden-regression-2fa" in r.text and "safety-001" not in r.text
        r = pm.get("/runs/demo-run-1", params={"draft_intent": "cancellation"}, headers={"HX-Request": "true"})
        assert r.status_code == 200 and "safety-001" in r.text and "golden-regression-2fa" not in r.text
        api = pm.get("/api/v1/runs/demo-run-1/drafts", params={"draft_intent": "account_security"}).json()
        assert [d["case_id"] for d in api["drafts"]] == ["golden-regression-2fa"]
        missing = pm.get("/api/v1/runs/no-such-run/drafts")
        assert missing.status_code == 404 and "no-such-run" in missing.json()["detail"]

    def test_a_run_named_by_digits_int_refuses_is_a_404_not_a_500(
        self, session: Session, client_as: Callable[..., TestClient]
    ) -> None:
        """'¹6' and '٣' are digits to str.isdigit() but not to int(); a 20-digit number fits no id column."""
        run = seed(session)
        pm = client_as("pm")
        assert pm.get(f"/api/v1/runs/{run.id}/drafts").status_code == 200  # the id still finds the run
        for ref in ("¹6", "٣", "99999999999999999999999"):
            for path in (f"/api/v1/runs/{ref}/drafts", f"/api/v1/runs/{ref}/regression", f"/runs/{ref}"):
                r = pm.get(path)
                assert r.status_code == 404, (path, r.status_code)


def test_home_newest_run_card_names_the_newest_run_without_a_count_badge(session: Session, spec: EvalSpec) -> None:
    """The card names the run created last (any source, a later-recorded one included) and carries no badge:
    the number of runs is not a number of things waiting."""
    pm = Principal(user_id=1, email="pm@example.test", name="PM", roles=frozenset({"pm"}))
    ds = make_dataset(session, [dict(case_id="c1")])
    t = dt.datetime(2026, 11, 20, 9, tzinfo=dt.UTC)
    make_run(session, ds, name="first", created_at=t)
    make_run(session, ds, name="second", created_at=t + dt.timedelta(days=2))
    session.commit()
    (card,) = home_cards(session=session, principal=pm, spec=spec)
    assert card.title == "Newest run: second" and card.count is None
    assert "One of 2 runs" in card.body and "2026-11-22 09:00 UTC" in card.body
    make_run(session, ds, name="third", created_at=t + dt.timedelta(days=3))
    session.commit()
    (card,) = home_cards(session=session, principal=pm, spec=spec)
    assert card.title == "Newest run: third" and card.count is None and "One of 3 runs" in card.body
