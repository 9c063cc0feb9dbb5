"""Grade until decided over the JSON API (issue 43): the lead sets and unsets it, leads, the PM and CI read the calls."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.ppi.conftest import JUDGE, build_run
from tests.ppi.test_until_decided import T0, grade, sampled_run
from webapp.core.spec import EvalSpec
from webapp.grading.models import GradingPlan
from webapp.ppi.anytime import grades_to_decide, half_width
from webapp.ppi.models import PpiDecision, PpiUntilDecided
from webapp.ppi.report import run_report
from webapp.ppi.service import draw_further_sample, draw_sample
from webapp.ppi.until_decided import draw_order, on_final_grade, set_until_decided

CRITERIA = ["factual_accuracy", "citation_relevance", "tone", "completeness"]


def url(name: str) -> str:
    return f"/api/v1/ppi/runs/{name}/until-decided"


def settings(session: Session, run_id: int) -> list[PpiUntilDecided]:
    session.expire_all()
    return list(session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).all())


class TestSetting:
    def test_put_sets_it_and_the_same_body_again_changes_nothing(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        run, _ = sampled_run(session)
        assert run.id is not None
        session.commit()
        lead = api_as("lead", email="lead-ud@example.test")
        first = lead.put(url(run.name), json={"on": True, "cap": 60})
        assert first.status_code == 200, first.text
        body = first.json()
        assert (body["on"], body["cap"], body["closed"], body["set_by"]) == (True, 60, False, "lead-ud@example.test")
        assert body["graded"] == 0 and body["drafts"] == 120
        assert [c["key"] for c in body["criteria"]] == CRITERIA
        assert all(c["verdict"] == "undecided" and not c["decided"] and c["decision"] is None for c in body["criteria"])
        assert all(c["reason"] == "no estimate yet: too few final grades" for c in body["criteria"])
        (row,) = settings(session, run.id)
        again = lead.put(url(run.name), json={"on": True, "cap": 60})
        assert again.status_code == 200 and again.json() == body  # idempotent: set_at not moved
        (same,) = settings(session, run.id)
        assert (same.id, same.set_at) == (row.id, row.set_at)
        # a new cap is a change; none is one too
        assert lead.put(url(run.name), json={"on": True, "cap": 70}).json()["cap"] == 70
        assert lead.put(url(run.name), json={"on": True}).json()["cap"] is None
        assert lead.get(url(run.name)).json()["cap"] is None

    def test_unset_serves_the_whole_sample_again_and_is_idempotent(
        self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        run, order = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, cap=3, now=T0)
        for draft_id in order[:3]:
            grade(session, draft_id)
            out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
        assert out is not None and out.closed_reason is not None
        session.commit()
        lead = api_as("lead")
        assert lead.get(url(run.name)).json()["closed_reason"] == "the cap of 3 grades reached, 4 criteria undecided"
        off = lead.put(url(run.name), json={"on": False})
        assert off.status_code == 200 and off.json()["on"] is False and off.json()["closed"] is False
        assert settings(session, run.id) == []
        assert session.exec(select(GradingPlan.closed_reason).where(GradingPlan.run_id == run.id)).all() == [None] * len(order)
        assert lead.put(url(run.name), json={"on": False}).json() == off.json()


class TestCalls:
    def test_get_reads_each_decision_with_its_time_and_grades_and_the_reason(
        self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        run, order = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, now=T0)
        closed_at = None
        for k, draft_id in enumerate(order):
            grade(session, draft_id)
            out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0 + dt.timedelta(minutes=k))
            assert out is not None
            if out.closed_reason:
                closed_at = k
                break
        assert closed_at is not None
        session.commit()
        body = api_as(scopes=["ci"]).get(url(run.name)).json()  # the team's CI reads it
        assert body["closed"] and body["closed_reason"] == f"every gate criterion decided on {closed_at + 1} grades"
        assert dt.datetime.fromisoformat(body["closed_at"]) == T0 + dt.timedelta(minutes=closed_at)
        stored = {d.criterion: d for d in session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id)).all()}
        for c in body["criteria"]:
            d = stored[c["key"]]
            assert c["decided"] and c["verdict"] == "pass" and c["more_grades"] is None
            assert c["decision"]["grades"] == d.grades and c["decision"]["sequence_low"] == d.low
            # decided at the grade it rested on: the grades' times are a minute apart from T0
            assert dt.datetime.fromisoformat(c["decision"]["decided_at"]) == T0 + dt.timedelta(minutes=d.grades - 1)
            low, threshold = c["sequence_low"], c["threshold"]
            assert low > threshold
            shown = f"{low:.3f}" if c["key"] == "factual_accuracy" else f"{low:.2f}"
            assert c["reason"].startswith(f"the sequence's lower bound {shown} is above the threshold")
        assert stored["tone"].grades >= 30  # no call before MIN_GRADES

    def test_about_k_more_is_the_first_grade_count_whose_half_width_is_below_the_distance(
        self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        run, order = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, now=T0)
        for k, draft_id in enumerate(order[:33]):
            grade(session, draft_id, tone=(2.0, 4.0, 5.0)[k % 3])  # tone mean 3.67: close to 3.5, a spread to estimate
            on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
        session.commit()
        body = api_as("pm").get(url(run.name)).json()
        report = run_report(session=session, spec=spec, run_id=run.id)
        assert report is not None
        e = report.figures["tone"].estimate
        assert e is not None and e.n_labels == 33
        (c,) = [c for c in body["criteria"] if c["key"] == "tone"]
        assert c["verdict"] == "undecided" and not c["decided"]
        assert c["reason"] == f"the sequence [{c['sequence_low']:.2f}, {c['sequence_high']:.2f}] straddles the threshold 3.50"
        # independently of grades_to_decide's bisection: walk m up from the grades given until the sequence's
        # half-width at m grades (the spread per grade kept) falls below the estimate's distance to 3.5
        n, t = e.n_drafts, e.df + 1.0
        spread = e.se / (1 / min(t, e.n_labels) - 1 / n) ** 0.5
        ratio = t / e.n_labels
        # (none below n deciding: n, the census, which gives the run's mean exactly)
        m = max(30, e.n_labels)
        while m < n and not half_width(spread * (1 / (m * ratio) - 1 / n) ** 0.5, m * ratio, m, n) < abs(e.estimate - 3.5):
            m += 1
        assert c["more_grades"] == m - e.n_labels > 0
        assert c["more_grades"] == grades_to_decide(
            estimate=e.estimate, se=e.se, carriers=t, graded=e.n_labels, drafts=n, threshold=3.5
        ) - e.n_labels  # type: ignore[operator]


class TestRefused:
    @pytest.mark.parametrize(
        ("body", "says"),
        [
            ({"on": True, "cap": 0}, "cap"),
            ({"on": True, "cap": 121}, "cap: at most the run's 120 drafts"),
            ({"on": False, "cap": 5}, "cap: only with on: true"),
            ({"on": True, "cap": "ten"}, "cap"),
            ({"cap": 5}, "on"),
            ({"on": True, "limit": 5}, "limit"),
        ],
    )
    def test_bad_input_is_422_naming_the_field_and_nothing_is_written(
        self, session: Session, api_as: Callable[..., TestClient], body: dict[str, object], says: str
    ) -> None:
        run, _ = sampled_run(session)
        assert run.id is not None
        session.commit()
        r = api_as("lead").put(url(run.name), json=body)
        assert r.status_code == 422 and says in r.text, r.text
        assert settings(session, run.id) == []

    def test_a_cap_below_the_grades_given_is_refused(self, session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]) -> None:
        run, order = sampled_run(session)
        assert run.id is not None
        for draft_id in order[:4]:
            grade(session, draft_id)
        session.commit()
        r = api_as("lead").put(url(run.name), json={"on": True, "cap": 3})
        assert r.status_code == 422 and "cap: the run has 4 final grades already" in r.text

    def test_a_run_without_a_sample(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        run, _ = build_run(session, n=10, golden=0)
        session.commit()
        lead = api_as("lead")
        r = lead.put(url(run.name), json={"on": True})
        assert r.status_code == 422 and "run: this run has no sample yet" in r.text
        assert lead.put(url(run.name), json={"on": False}).status_code == 422
        assert lead.get(url(run.name)).status_code == 404
        assert lead.get(url("no-such-run")).status_code == 404

    def test_a_run_whose_inclusion_probabilities_changed_after_a_grade(
        self, session: Session, api_as: Callable[..., TestClient]
    ) -> None:
        run, _ = build_run(session, n=120, golden=0)
        assert run.id is not None
        draw_sample(session=session, run_id=run.id, budget=40, judge_version=JUDGE, seed=5, now=T0)
        grade(session, draw_order(session=session, run_id=run.id)[0])  # graded at the database's now, after T0
        draw_further_sample(session=session, run_id=run.id, budget=10, seed=6)  # not graded until decided: allowed
        session.commit()
        r = api_as("lead").put(url(run.name), json={"on": True})
        assert r.status_code == 422 and "sample: round 2 changed the inclusion probabilities after a final grade" in r.text
        assert settings(session, run.id) == []


class TestWho:
    @pytest.mark.parametrize("role", ["labeler", "pm", "ml_lead", "support_lead", "admin"])
    def test_only_a_lead_puts(self, session: Session, api_as: Callable[..., TestClient], role: str) -> None:
        run, _ = sampled_run(session)
        session.commit()
        r = api_as(role).put(url(run.name), json={"on": True})
        assert r.status_code == 403
        assert run.id is not None and settings(session, run.id) == []

    def test_a_ci_token_reads_but_does_not_set(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        run, _ = sampled_run(session)
        session.commit()
        ci = api_as(scopes=["ci"])
        assert ci.get(url(run.name)).status_code == 200
        assert ci.put(url(run.name), json={"on": True}).status_code == 403

    def test_a_labeler_does_not_read_the_calls(self, session: Session, api_as: Callable[..., TestClient]) -> None:
        run, _ = sampled_run(session)
        session.commit()
        assert api_as("labeler").get(url(run.name)).status_code == 403  # blind grading
        assert api_as(scopes=["ingest"]).get(url(run.name)).status_code == 403

    def test_a_session_put_needs_the_csrf_token_a_bearer_token_does_not(
        self, session: Session, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
    ) -> None:
        run, _ = sampled_run(session)
        assert run.id is not None
        session.commit()
        lead = client_as("lead")
        token = lead.headers.pop("X-CSRF-Token")
        assert lead.put(url(run.name), json={"on": True}).status_code == 403
        assert settings(session, run.id) == []
        assert lead.put(url(run.name), json={"on": True}, headers={"X-CSRF-Token": token}).status_code == 200
        assert api_as("lead").put(url(run.name), json={"on": True, "cap": 50}).status_code == 200
