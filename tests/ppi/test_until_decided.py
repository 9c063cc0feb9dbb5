"""Grade until decided (issue 43): decisions stored after every final grade, re-opened by a correction, the run closed, pi frozen."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.conftest import csrf_for
from tests.ppi.conftest import JUDGE, build_run
from webapp.core.spec import EvalSpec
from webapp.gates.criteria import human_grading
from webapp.gates.facts import ppi_facts
from webapp.gates.pilot_facts import PilotFacts
from webapp.grading.models import FinalGrade
from webapp.ppi.models import PpiDecision, PpiDraw, PpiUntilDecided
from webapp.ppi.report import run_report
from webapp.ppi.service import PpiError, draw_further_sample, draw_sample
from webapp.ppi.until_decided import UntilDecidedError, calls, draw_order, on_final_grade, set_until_decided
from webapp.runs.models import Run

T0 = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)


def grade(session: Session, draft_id: int, *, tone: float = 4.0) -> FinalGrade:
    row = FinalGrade(draft_id=draft_id, factual_accuracy="pass", citation_relevance=4, tone=tone, completeness=4, source="agreement")
    session.add(row)
    session.flush()
    return row


def sampled_run(session: Session) -> tuple[Run, list[int]]:
    """A run of 120 drafts with 90 drawn (no golden); the drawn drafts' ids in the queue's draw order."""
    run, _ = build_run(session, n=120, golden=0)
    assert run.id is not None
    draw_sample(session=session, run_id=run.id, budget=90, judge_version=JUDGE, seed=5)
    order = draw_order(session=session, run_id=run.id)
    drawn = session.exec(select(PpiDraw.draft_id).where(PpiDraw.run_id == run.id, col(PpiDraw.drawn).is_(True))).all()
    assert sorted(order) == sorted(drawn) and order != sorted(order)  # every drawn draft once, not in id order
    return run, order


class TestGradeUntilDecided:
    def test_each_decision_is_stored_with_its_time_and_grades_and_the_run_closes(self, session: Session, spec: EvalSpec) -> None:
        run, drawn = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, cap=None, now=T0)
        closed = None
        for k, draft_id in enumerate(drawn):
            grade(session, draft_id)
            out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0 + dt.timedelta(minutes=k))
            assert out is not None
            if out.closed_reason:
                closed = (k + 1, out.closed_reason)
                break
        assert closed is not None, "every drawn draft graded at 4 with a 4 from the judge: the sequence decides"
        graded, reason = closed
        assert reason == f"every gate criterion decided on {graded} grades"
        setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).one()
        assert setting.closed_reason == reason and setting.closed_at is not None
        decisions = session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id)).all()
        assert {d.criterion for d in decisions} == {"factual_accuracy", "citation_relevance", "tone", "completeness"}
        report = run_report(session=session, spec=spec, run_id=run.id)
        assert report is not None
        now = calls(spec, report)
        for d in decisions:
            # stored when it was made: its grades are the final grades at that moment (at least 30: no call before)
            assert 30 <= d.grades <= graded and d.verdict == now[d.criterion].verdict
            assert d.decided_at.replace(tzinfo=dt.UTC) == T0 + dt.timedelta(minutes=d.grades - 1)
        # the gate report shows each decision's time and grades
        gate_spec = spec.model_copy(update={"gates": spec.gates.model_copy(update={"human_grading": "intervals"})})
        facts = ppi_facts(session=session, spec=gate_spec, run_id=run.id)
        assert facts is not None
        human = human_grading(PilotFacts(run.id, run.name, 0, ppi=facts), gate_spec)
        tone = next(d for d in decisions if d.criterion == "tone")
        when = (T0 + dt.timedelta(minutes=tone.grades - 1)).strftime("%Y-%m-%d %H:%M")
        assert f"decided {when} UTC on {tone.grades} grades" in next(p for p in human.parts if p.key == "tone").summary

    def test_a_correction_after_a_decision_reopens_it_with_who_and_when(self, session: Session, spec: EvalSpec) -> None:
        run, drawn = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, cap=40, now=T0)
        rows = []
        for draft_id in drawn[:40]:
            rows.append(grade(session, draft_id))
            out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
        tone = session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id, PpiDecision.criterion == "tone")).one()
        assert tone.verdict == "pass" and tone.reopened_at is None
        assert out is not None
        assert session.exec(select(PpiUntilDecided.closed_at).where(PpiUntilDecided.run_id == run.id)).one() is not None  # decided: closed
        # the lead corrects ten tone grades to 1 after the decision: tone is no longer above 3.5 for sure
        for row in rows[:10]:
            row.tone, row.source, row.decided_by = 1.0, "adjudication", None
            session.add(row)
        session.flush()
        later = T0 + dt.timedelta(hours=2)
        out = on_final_grade(session=session, spec=spec, draft_id=rows[9].draft_id, now=later)
        assert out is not None and "tone" in out.reopened
        session.refresh(tone)
        assert tone.reopened_at is not None and tone.reopened_at.replace(tzinfo=dt.UTC) == later
        assert tone.reopen_reason is not None and f"draft {rows[9].draft_id}" in tone.reopen_reason

    def test_the_cap_closes_the_run_with_the_reason(self, session: Session, spec: EvalSpec) -> None:
        run, drawn = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, cap=5, now=T0)
        for draft_id in drawn[:5]:
            grade(session, draft_id)
            out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0)
        assert out is not None and out.closed_reason == "the cap of 5 grades reached, 4 criteria undecided"

    def test_new_inclusion_probabilities_after_a_grade_are_refused(self, session: Session, spec: EvalSpec) -> None:
        run, drawn = sampled_run(session)
        assert run.id is not None
        set_until_decided(session=session, run_id=run.id, now=T0)
        draw_further_sample(session=session, run_id=run.id, budget=5, seed=9)  # before any grade: allowed
        grade(session, drawn[0])
        with pytest.raises(PpiError, match="inclusion probabilities cannot change"):
            draw_further_sample(session=session, run_id=run.id, budget=5, seed=10)

    def test_bad_settings_are_refused_naming_the_field(self, session: Session, spec: EvalSpec) -> None:
        run, _ = build_run(session, n=10, golden=0)
        assert run.id is not None
        with pytest.raises(UntilDecidedError, match="run: this run has no sample"):
            set_until_decided(session=session, run_id=run.id)
        with pytest.raises(UntilDecidedError, match="cap: must be a positive"):
            set_until_decided(session=session, run_id=run.id, cap=0)


class TestRoute:
    def test_only_a_lead_sets_it_with_the_csrf_token_and_a_bad_cap_is_named(self, session: Session, client_as: Callable[..., TestClient]) -> None:
        run, _ = sampled_run(session)
        session.commit()
        url = f"/ppi/runs/{run.name}/until-decided"
        labeler = client_as("labeler")
        assert labeler.post(url, data={"csrf_token": csrf_for(labeler), "cap": "10"}).status_code == 403
        lead = client_as("lead")
        assert lead.post(url, data={"cap": "10"}, headers={"X-CSRF-Token": ""}).status_code == 403  # no CSRF token
        bad = lead.post(url, data={"csrf_token": csrf_for(lead), "cap": "ten"}, follow_redirects=True)
        assert "cap: a whole number of grades" in bad.text
        assert session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).first() is None
        ok = lead.post(url, data={"csrf_token": csrf_for(lead), "cap": "10"}, follow_redirects=False)
        assert ok.status_code == 303
        session.expire_all()
        setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).one()
        assert setting.cap == 10 and setting.closed_at is None
        page = lead.get(f"/ppi/runs/{run.name}").text
        assert 'id="ppi-until-decided"' in page


def test_a_run_whose_drawn_drafts_are_all_graded_undecided_closes_saying_so(session: Session, spec: EvalSpec) -> None:
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
    assert undecided >= 1  # else it would close as decided
    assert out is not None and out.closed_reason == f"every drawn draft graded ({len(order)}), {undecided} criteria undecided"
