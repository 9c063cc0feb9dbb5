"""Grade until decided (issue 43) on the run page: the lead's stop button, and the all-graded closing the page and gate say."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import csrf_for
from tests.factories import make_user
from tests.ppi.conftest import JUDGE, build_run
from tests.ppi.test_until_decided import T0, grade, sampled_run
from tests.ppi.test_until_decided_queue import served
from webapp.core.spec import EvalSpec
from webapp.gates.criteria import human_grading_ppi
from webapp.gates.facts import ppi_facts
from webapp.grading.models import GradingPlan
from webapp.ppi.models import PpiDecision, PpiUntilDecided
from webapp.ppi.report import run_report
from webapp.ppi.service import draw_sample
from webapp.ppi.until_decided import ALL_GRADED, calls, draw_order, on_final_grade, set_until_decided
from webapp.runs.models import Run


def stop_url(name: str) -> str:
    return f"/ppi/runs/{name}/until-decided/stop"


def settings(session: Session, run_id: int) -> list[PpiUntilDecided]:
    session.expire_all()
    return list(session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run_id)).all())


def capped_run(session: Session, spec: EvalSpec) -> tuple[Run, list[int]]:
    """A sampled run graded until decided whose queue closed at a cap of 3 grades (4 criteria undecided)."""
    run, order = sampled_run(session)
    assert run.id is not None
    set_until_decided(session=session, run_id=run.id, cap=3, now=T0)
    out = None
    for draft_id in order[:3]:
        grade(session, draft_id)
        out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
    assert out is not None and out.closed_reason == "the cap of 3 grades reached, 4 criteria undecided"
    session.commit()
    return run, order


class TestStopButton:
    def test_the_lead_stops_it_and_the_queue_serves_the_whole_sample_again(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        run, order = capped_run(session, spec)
        assert run.id is not None
        decisions = len(session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id)).all())
        grader = make_user(session, email="after-stop@example.test", roles=["labeler"])
        assert grader.id is not None
        session.commit()
        # closed at the cap: none of the drawn drafts without a final grade is served (the graded ones stay open to
        # corrections; this test's final grades come without graders' places, so the queue may offer those)
        assert not set(served(session, spec, run.id, grader.id)) & set(order[3:])
        lead = client_as("lead")
        page = lead.get(f"/ppi/runs/{run.name}").text
        assert f'action="/ppi/runs/{run.name}/until-decided/stop"' in page and "Stop grading until decided" in page
        r = lead.post(stop_url(run.name), data={"csrf_token": csrf_for(lead)}, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == f"/ppi/runs/{run.name}"
        assert settings(session, run.id) == []
        assert session.exec(select(GradingPlan.closed_reason).where(GradingPlan.run_id == run.id)).all() == [None] * len(order)
        assert set(order[3:]) <= set(served(session, spec, run.id, grader.id))  # every drawn draft without a final grade again
        assert len(session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id)).all()) == decisions
        session.commit()  # end the test's read (SQLite: the page may store the figures it reads)
        after = lead.get(f"/ppi/runs/{run.name}").text
        assert "no longer graded until decided; the queue serves the whole sample again; stored decisions stay." in after
        assert "until-decided/stop" not in after and "This run is not graded until decided" in after
        # again: nothing to stop, said so, nothing changed
        again = lead.post(stop_url(run.name), data={"csrf_token": csrf_for(lead)}, follow_redirects=True)
        assert "not graded until decided; nothing changed." in again.text

    @pytest.mark.parametrize("role", ["labeler", "pm", "support_lead", "ml_lead", "admin"])
    def test_only_a_lead_stops_it(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], role: str) -> None:
        run, _ = capped_run(session, spec)
        assert run.id is not None
        other = client_as(role)
        assert other.post(stop_url(run.name), data={"csrf_token": csrf_for(other)}).status_code == 403
        assert len(settings(session, run.id)) == 1
        if role != "labeler":  # the labeler does not see the PPI page at all (blind grading)
            assert "until-decided/stop" not in other.get(f"/ppi/runs/{run.name}").text

    def test_a_post_without_the_csrf_token_is_refused(self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]) -> None:
        run, _ = capped_run(session, spec)
        assert run.id is not None
        lead = client_as("lead")
        assert lead.post(stop_url(run.name), data={}, headers={"X-CSRF-Token": ""}).status_code == 403
        assert len(settings(session, run.id)) == 1


def all_graded_undecided(session: Session, spec: EvalSpec) -> tuple[Run, list[int], str | None, int]:
    """A run of 120 drafts, 8 drawn, graded until decided: every drawn draft graded, too few grades to decide."""
    run, _ = build_run(session, n=120, golden=0)
    assert run.id is not None
    draw_sample(session=session, run_id=run.id, budget=8, judge_version=JUDGE, seed=5)
    order = draw_order(session=session, run_id=run.id)
    set_until_decided(session=session, run_id=run.id, now=T0)
    out = None
    for draft_id in order:
        grade(session, draft_id)
        out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
        assert out is not None and (out.closed_reason is None) == (draft_id != order[-1])
    report = run_report(session=session, spec=spec, run_id=run.id)
    assert report is not None and report.pending == 0
    undecided = sum(c.verdict == "undecided" for c in calls(spec, report).values())
    session.commit()
    return run, order, None if out is None else out.closed_reason, undecided


def test_the_all_graded_closing_is_stored_and_the_page_and_the_gate_say_it(
    session: Session, spec: EvalSpec, client_as: Callable[..., TestClient]
) -> None:
    run, order, reason, undecided = all_graded_undecided(session, spec)
    assert run.id is not None and undecided >= 1
    said = f"every drawn draft graded ({len(order)}), {undecided} criteria undecided"
    assert reason == said
    (setting,) = settings(session, run.id)
    assert setting.closed_at is not None and setting.closed_reason == said
    page = client_as("lead").get(f"/ppi/runs/{run.name}").text
    assert f"Its queue closed</strong> {T0:%Y-%m-%d %H:%M} UTC: {said}." in page
    assert 'id="ppi-all-graded"' in page and "no grade is left to serve" in page
    assert "until-decided/stop" in page  # the way out the page names
    facts = ppi_facts(session=session, spec=spec, run_id=run.id)
    assert facts is not None and facts.closed_reason == said and facts.pending == 0
    crit = human_grading_ppi(facts, spec)
    assert crit.status == "incomplete"
    assert f"graded until decided, its queue closed: {said}; " in crit.summary
    assert crit.action.startswith("Stop grading until decided") and "Draw a further sample" not in crit.action


def test_the_all_graded_closing_reason_follows_the_calls_and_the_run_stays_closed(session: Session, spec: EvalSpec) -> None:
    run, order, reason, _ = all_graded_undecided(session, spec)
    assert run.id is not None and reason is not None and reason.startswith(ALL_GRADED)
    (setting,) = settings(session, run.id)
    closed_at = setting.closed_at
    # as if a correction had changed the calls since the closing (the reason then counted other undecided criteria)
    setting.closed_reason = f"{ALL_GRADED} ({len(order)}), 9 criteria undecided"
    session.add(setting)
    session.commit()
    out = on_final_grade(session=session, spec=spec, draft_id=order[0], now=T0 + dt.timedelta(hours=1))
    assert out is not None and out.closed_reason is None  # it closed earlier, not now
    (setting,) = settings(session, run.id)
    assert setting.closed_reason == reason and setting.closed_at == closed_at
