"""Gate pages and the home card: the regression cases a run lacks, and golden failures named by check."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.factories import make_article, make_dataset, make_run
from tests.gates.test_service import build_run, good_draft, ready_run, small_gate_spec
from tests.reactions_support import after_run_checked
from webapp.checks import service as checks_service
from webapp.core.spec import EvalSpec
from webapp.gates import service
from webapp.regression import service as regression_service


def test_review_case_the_run_lacks_is_listed_with_the_export_command(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
) -> None:
    spec = small_gate_spec(spec)
    run, lead = ready_run(session, spec)
    assert service.pilot_report(session=session, spec=spec, run=run).passed
    # The PM adds a production pair from the weekly review: no dataset has it.
    regression_service.add_case(
        session=session, created_by=lead.id, source="review", case_id="review-ev-77", input="Where is my refund?", note="wrong refund time"
    )
    session.commit()
    rep = service.pilot_report(session=session, spec=spec, run=run)
    reg = next(c for c in rep.criteria if c.key == "regression_suite")
    assert rep.status == "incomplete" and reg.status == "incomplete"  # the rule stands
    assert reg.summary == "1 regression case not in this run (review-ev-77)"
    assert reg.command == "draftdesk regression export regression-suite.jsonl"
    # The gate page (with the app's real spec: the page shows what the API and CLI show).
    page = client_as("pm").get(f"/gates/pilot?run={run.name}")
    assert page.status_code == 200
    assert "This run does not include 1 regression case: review-ev-77." in page.text
    assert "<code>draftdesk regression export regression-suite.jsonl</code>" in page.text
    data = api_as("pm").get(f"/api/v1/gates/pilot?run={run.name}").json()
    crit = next(c for c in data["criteria"] if c["key"] == "regression_suite")
    assert "review-ev-77" in crit["action"] and crit["command"] == "draftdesk regression export regression-suite.jsonl"
    md = client_as("lead").get(f"/gates/pilot?run={run.name}&format=markdown").text
    assert "review-ev-77" in md and "`draftdesk regression export regression-suite.jsonl`" in md


def test_golden_citation_failure_is_named_on_the_home_cards(session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
    # golden-2fa cites a deprecated revision: it fails the citation check, not a factual-accuracy grade.
    make_article(session, "KB-1")
    make_article(session, "KB-9", ((1, "deprecated"), (2, "current")))
    cases = [{"case_id": f"r-{i}", "category": "routine", "intent": "billing_charge"} for i in range(3)]
    ds = make_dataset(session, [{"case_id": "golden-2fa", "category": "routine", "intent": "billing_charge", "golden": True}, *cases])
    stale = {**good_draft("golden-2fa"), "citations": [{"article_id": "KB-9", "revision": 1}]}
    run = make_run(session, ds, [stale, *(good_draft(c["case_id"]) for c in cases)], name="run-2fa")
    checks_service.check_run(session=session, spec=spec, run_id=run.id)
    after_run_checked(session, spec, run.id)  # as the check page and CLI do
    session.commit()
    home = client_as("pm").get("/").text
    assert "golden example golden-2fa fails Citations current in run-2fa" in home  # regression alerts card
    assert "Golden examples: golden-2fa fails Citations current" in home  # pilot gate card
    assert "factual accuracy" not in home.lower()


def test_gate_page_shows_the_sets_mix_against_the_plan(session: Session, client_as: Callable[..., TestClient]) -> None:
    # The app's plan is 60/20/10/10; build_run's set is 9 routine + 1 safety (90/0/0/10).
    run = build_run(session)
    session.commit()
    page = client_as("pm").get(f"/gates/pilot?run={run.name}").text
    assert "the eval set does not match the plan: the category mix does not match the plan&#39;s stratified sample" in page
    assert "↳ Routine cases</td><td>9 (90.0%)</td><td>60% ± 5 pts</td>" in page
    assert "↳ Safety cases</td><td>1 (10.0%)</td><td>10% ± 5 pts</td>" in page
    assert "↳ Intents (the plan&#39;s top 10)</td><td>all 10 labelled cases in the top 10</td>" in page


def test_gate_without_run_opens_the_newest_run(session: Session, client_as: Callable[..., TestClient]) -> None:
    """`/gates/production` without `?run=` opens the newest launch candidate's report (not a bare 422);
    a production-week run is no candidate; with no run at all, the gates index explains how to add one."""
    pm = client_as("pm")
    empty = pm.get("/gates/production", follow_redirects=False)
    assert empty.status_code == 303 and empty.headers["location"] == "/gates"
    assert "No runs yet" in pm.get("/gates/production").text
    ds = make_dataset(session, [dict(case_id="c1")])
    t = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
    make_run(session, ds, name="older", created_at=t)
    make_run(session, ds, name="newer one", created_at=t + dt.timedelta(days=1))
    make_run(session, ds, name="week-2026-W47", source=service.PRODUCTION_SOURCE, created_at=t + dt.timedelta(days=2))
    session.commit()
    for gate in ("production", "pilot"):
        r = pm.get(f"/gates/{gate}", follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/gates/{gate}?run=newer%20one"
        page = pm.get(f"/gates/{gate}")
        assert page.status_code == 200 and "newer one" in page.text
    md = pm.get("/gates/pilot?format=markdown", follow_redirects=False)
    assert md.headers["location"] == "/gates/pilot?run=newer%20one&format=markdown"
    assert pm.get("/gates/pilot?run=no-such-run").status_code == 404
    assert client_as("labeler").get("/gates/production", follow_redirects=False).status_code == 403
