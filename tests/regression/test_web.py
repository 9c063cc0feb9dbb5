"""Regression pages and JSON API: suite, add from draft, export, compare, baseline, alerts, home cards."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session

from tests.checks.conftest import World
from tests.factories import make_dataset, make_run
from tests.reactions_support import after_run_checked
from webapp.checks import service as checks_service
from webapp.core.spec import EvalSpec
from webapp.regression import service

MakeClient = Callable[..., TestClient]


def _checked(session: Session, spec: EvalSpec, world: World) -> dict[str, int]:
    """Check both runs with A as baseline; return B's draft ids by case id."""
    checks_service.check_run(session=session, spec=spec, run_id=world.a.id)
    service.mark_baseline(session=session, run_id=world.a.id)
    result = checks_service.check_run(session=session, spec=spec, run_id=world.b.id)
    after_run_checked(session, spec, world.b.id)
    session.commit()
    return {o.case_id: o.draft_id for o in result.summary.outcomes}


class TestAddFromDraft:
    def test_form_then_post_appends_and_redirects(
        self, session: Session, spec: EvalSpec, world: World, client_as: MakeClient
    ) -> None:
        ids = _checked(session, spec, world)
        form = client_as("pm").get(f"/regression/cases/from-draft/{ids['s2']}")
        assert form.status_code == 200 and "safety_escalation" in form.text
        labeler = client_as("labeler")
        blind = labeler.get(f"/regression/cases/from-draft/{ids['s2']}")  # blind grading: not graded by this labeler
        assert blind.status_code == 200 and "safety_escalation" not in blind.text and "hidden until you grade it" in blind.text
        prefilled = labeler.get(f"/regression/cases/from-draft/{ids['s2']}", params={"source": "review", "note": "seen <b>weekly</b>"})
        assert '<option value="review" selected>' in prefilled.text and "seen &lt;b&gt;weekly&lt;/b&gt;" in prefilled.text
        r = labeler.post(
            f"/regression/cases/from-draft/{ids['s2']}", data={"note": "cheerful reply to distress", "source": "grading"}, follow_redirects=False
        )
        assert r.status_code == 303 and r.headers["location"] == "/regression?added=s2#case-s2"
        (case,) = service.list_cases(session=session)
        assert (case.case_id, case.source, case.note) == ("s2", "grading", "cheerful reply to distress")
        # The suite page says at once that the next run must include the case, and how.
        shown = labeler.get("/regression?added=s2")
        assert "Added s2 to the regression suite. The next run must include s2: runs over eval have it" in shown.text
        assert "draftdesk regression export regression-suite.jsonl" in shown.text
        assert "The next run must include" not in labeler.get("/regression?added=nope").text
        again = labeler.post(f"/regression/cases/from-draft/{ids['s2']}", data={"note": "again"})
        assert again.status_code == 409 and "already in the regression suite" in again.text
        assert client_as("support_lead").post(f"/regression/cases/from-draft/{ids['g1']}", data={"note": "n"}).status_code == 403
        assert client_as("admin").get(f"/regression/cases/from-draft/{ids['g1']}").status_code == 403

    def test_api_add_and_list(self, session: Session, spec: EvalSpec, world: World, api_as: MakeClient) -> None:
        ids = _checked(session, spec, world)
        pm = api_as("pm")
        r = pm.post("/api/v1/regression/cases", json={"draft_id": ids["g1"], "note": "stale 2FA article", "source": "review"})
        assert r.status_code == 201 and r.json()["case_id"] == "g1"
        assert r.json()["next_run"] == service.inclusion_notice(session=session, case_id="g1")
        assert r.json()["next_run"].startswith("The next run must include g1: runs over eval have it")
        assert pm.post("/api/v1/regression/cases", json={"draft_id": ids["g1"], "note": "x"}).status_code == 409
        listing = pm.get("/api/v1/regression/cases").json()
        assert listing["count"] == 1 and listing["target"] == spec.regression.target_cases


class TestSuitePages:
    def test_suite_and_run_report(self, session: Session, spec: EvalSpec, world: World, client_as: MakeClient) -> None:
        _checked(session, spec, world)
        service.seed_golden(session=session, created_by=world.user.id)
        session.commit()
        pm = client_as("pm")
        page = pm.get("/regression?run=run-b")
        assert page.status_code == 200
        assert "1 of 50 cases" in page.text and 'id="case-g1"' in page.text
        run_page = pm.get("/runs/run-b/regression")
        assert "cites KB-3001 revision 2" in run_page.text
        data = pm.get("/api/v1/runs/run-a/regression").json()
        assert data["passed"] == 1 and data["cases"][0]["status"] == "pass"

    def test_export_download(self, session: Session, world: World, client_as: MakeClient) -> None:
        service.seed_golden(session=session, created_by=world.user.id)
        session.commit()
        r = client_as("lead").get("/regression/export.jsonl")
        assert r.status_code == 200 and "attachment" in r.headers["content-disposition"]
        (line,) = r.text.splitlines()
        assert json.loads(line)["id"] == "g1"


class TestComparePages:
    def test_compare_page_and_api(self, session: Session, spec: EvalSpec, world: World, client_as: MakeClient, api_as: MakeClient) -> None:
        _checked(session, spec, world)
        page = client_as("pm").get("/runs/compare?a=run-a&b=run-b")
        assert page.status_code == 200
        assert "75.0% → 62.5%" in page.text and "-12.5 pts" in page.text
        data = api_as("lead").get("/api/v1/runs/compare", params={"a": "run-a", "b": "run-b"}).json()
        assert data["counts"] == {
            "fixed": 1, "broke": 2, "unchanged_pass": 4, "unchanged_fail": 1, "only_a": 0, "only_b": 0, "not_checked": 0
        }
        assert len(data["cases"]) == 8 and data["overall"]["paired"]["p_value"] == pytest.approx(1.0)
        assert data["overall"]["delta"] == pytest.approx(-0.125)
        # The per-check change list names the cases of the table (citations: r2 fixed; g1 broke, and
        # s2, escalated in A (not applicable) and a draft citing nothing in B (fails: issue 25 item 4)).
        checks = {c["key"]: c for c in data["checks"]}
        assert (checks["citations_current"]["fixed_cases"], checks["citations_current"]["broke_cases"]) == (["r2"], ["g1", "s2"])
        assert checks["safety_escalation"]["broke_cases"] == ["s2"]
        assert '1 fixed: <a class="mono" href="/runs/compare/cases/r2?a=run-a&amp;b=run-b">r2</a>' in page.text
        assert (
            '2 broke: <a class="mono" href="/runs/compare/cases/g1?a=run-a&amp;b=run-b">g1</a>, '
            '<a class="mono" href="/runs/compare/cases/s2?a=run-a&amp;b=run-b">s2</a>'
        ) in page.text
        api = api_as("pm")
        data = api.get("/api/v1/runs/compare", params={"a": "run-a", "b": "run-b", "golden": "yes"}).json()
        assert [c["case_id"] for c in data["cases"]] == ["g1"] and data["cases"][0]["change"] == "broke"
        r = api.get("/api/v1/runs/compare", params={"a": "run-a", "b": "run-b", "format": "csv"})
        assert r.headers["content-type"].startswith("text/csv") and len(r.text.splitlines()) == 9
        assert api.get("/api/v1/runs/compare", params={"a": "run-a"}).status_code == 422

    def test_case_table_filters_csv_fragment_and_side_by_side(
        self, session: Session, spec: EvalSpec, world: World, client_as: MakeClient
    ) -> None:
        _checked(session, spec, world)
        pm = client_as("pm")
        page = pm.get("/runs/compare?a=run-a&b=run-b&outcome=broke")
        assert page.status_code == 200 and "2 of 8 cases" in page.text
        assert "/runs/compare/cases/g1?a=run-a&amp;b=run-b" in page.text and "/runs/compare/cases/r1?" not in page.text
        # An htmx filter change gets only the case table, and says it varies with HX-Request.
        frag = pm.get("/runs/compare?a=run-a&b=run-b&outcome=fixed", headers={"HX-Request": "true"})
        assert "<html" not in frag.text and "1 of 8 cases" in frag.text and "HX-Request" in frag.headers["vary"]
        csv_text = pm.get("/runs/compare?a=run-a&b=run-b&outcome=broke&format=csv").text
        lines = csv_text.splitlines()
        assert lines[0].startswith("case_id,category,intent,golden,change") and len(lines) == 3
        assert lines[1].startswith("g1,") and ",broke,pass,," in lines[1] and "citations_current" in lines[1]
        bad = pm.get("/runs/compare?a=run-a&b=run-b&outcome=worse")
        assert bad.status_code == 422 and "outcome" in bad.text
        page = pm.get("/runs/compare/cases/g1?a=run-a&b=run-b")
        assert page.status_code == 200
        assert "Word diff: run-a → run-b" in page.text
        assert page.text.count("Automated checks") == 2 and "No final grade yet." in page.text
        missing = client_as("lead").get("/runs/compare/cases/nope?a=run-a&b=run-b")
        assert missing.status_code == 404

    def test_empty_form_and_different_datasets_refused(
        self, session: Session, world: World, client_as: MakeClient, api_as: MakeClient
    ) -> None:
        page = client_as("lead").get("/runs/compare")
        assert page.status_code == 200 and "run-a" in page.text
        other = make_dataset(session, [{"case_id": "z"}], name="other", version=3)
        make_run(session, other, [], name="other-run")
        session.commit()
        page = client_as("pm").get("/runs/compare?a=run-a&b=other-run")
        assert page.status_code == 422 and "only runs over the same dataset can be compared" in page.text
        assert api_as("pm").get("/api/v1/runs/compare?a=run-a&b=other-run").status_code == 422


class TestBaselineAndAlerts:
    def test_baseline_form(self, session: Session, world: World, client_as: MakeClient) -> None:
        lead = client_as("lead")
        r = lead.post(f"/runs/{world.b.id}/baseline", data={"action": "mark"}, follow_redirects=False)
        assert r.status_code == 303
        session.expire_all()
        assert service.baseline_for(session=session, run_id=world.a.id).name == "run-b"  # type: ignore[union-attr]
        assert client_as("labeler").post(f"/runs/{world.b.id}/baseline", data={"action": "mark"}).status_code == 403

    def test_alerts_page_api_ack_and_home_cards(
        self, session: Session, spec: EvalSpec, world: World, client_as: MakeClient, api_as: MakeClient
    ) -> None:
        _checked(session, spec, world)
        pm = client_as("pm")
        home = pm.get("/")
        # g1 cites a deprecated revision in run B: the card names that check, not factual accuracy.
        assert "Regression alerts" in home.text and "golden example g1 fails Citations current in run-b" in home.text
        assert "fails factual accuracy" not in home.text
        assert "pass rate of run-b down 12.5 points from the baseline" in home.text
        labeler_home = client_as("labeler").get("/")
        assert "Regression alerts" not in labeler_home.text
        page = pm.get("/regression/alerts")
        assert "down 12.5 points" in page.text and "Acknowledge" in page.text
        assert "golden: check" in page.text and "Golden example g1 fails Citations current in run run-b" in page.text
        assert "golden factual" not in page.text
        data = api_as("support_lead").get("/api/v1/regression/alerts?open=true").json()
        assert data["count"] == 2
        assert sorted(a["kind_label"] for a in data["alerts"]) == ["golden: check", "pass rate drop"]
        first = data["alerts"][0]["id"]
        assert api_as("support_lead").post(f"/api/v1/regression/alerts/{first}/acknowledge").status_code == 403
        r = pm.post(f"/regression/alerts/{first}/acknowledge", follow_redirects=False)
        assert r.status_code == 303
        assert api_as("lead").get("/api/v1/regression/alerts?open=true").json()["count"] == 1
