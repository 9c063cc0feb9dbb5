"""The demo's production weeks and PPI run: judged, sampled before grading, mostly graded, deterministic."""

from __future__ import annotations

import pytest
from sqlmodel import Session, col, select

from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.demo.seed import seed_demo
from webapp.grading.models import Grade
from webapp.metrics.models import Event
from webapp.ppi.demo import JUDGE_VERSION, LEFT_UNGRADED, PRODUCTION_CAP, PRODUCTION_WEEKS, RUN_NAME
from webapp.ppi.models import PpiDraw
from webapp.ppi.production import weekly_quality
from webapp.ppi.report import run_report
from webapp.ppi.service import redraw_from_rows
from webapp.runs.models import Draft, Run


@pytest.fixture
def db_url(demo_db_url: str) -> str:
    """The demo seeded once per test session (tests/conftest.py)."""
    return demo_db_url


def test_demo_weeks_and_ppi_run(session: Session, spec: EvalSpec) -> None:
    weeks = weekly_quality(session=session, spec=spec)
    assert [w.week for w in weeks] == ["2026-W45", "2026-W46", "2026-W47"]
    above, below, provisional = weeks
    assert above.above_targets and not above.below_target and not above.provisional  # every criterion above the team's target
    assert below.below_target and below.estimate is not None and below.estimate.high < 3.5
    assert provisional.provisional and provisional.pending == PRODUCTION_WEEKS[2][2] and not provisional.below_target
    assert all(w.drafts == PRODUCTION_CAP for w in weeks)
    # each week's run holds drafts of that week's events only
    for w in weeks:
        drafts = session.exec(select(Draft).where(Draft.run_id == w.run_id)).all()
        ids = [d.raw_output["event_id"] for d in drafts]  # type: ignore[index]
        days = set(session.exec(select(col(Event.day)).where(col(Event.event_id).in_(ids))).all())
        assert len(ids) == PRODUCTION_CAP and all(w.start <= d <= w.end for d in days)
    # The PPI run, after a second seed_demo: judged, sampled before grading, mostly graded.
    seed_demo(session=session, spec=spec)
    run = session.exec(select(Run).where(Run.name == RUN_NAME)).one()
    draws = session.exec(select(PpiDraw).where(PpiDraw.run_id == run.id).order_by(col(PpiDraw.draft_id))).all()
    assert draws and {d.judge_version for d in draws} == {JUDGE_VERSION}
    assert redraw_from_rows(session=session, run_id=run.id) == {d.draft_id: d.drawn for d in draws}  # type: ignore[arg-type]
    report = run_report(session=session, spec=spec, run_id=run.id)  # type: ignore[arg-type]
    assert report is not None and report.pending == LEFT_UNGRADED
    tone = report.figures["tone"].estimate
    assert tone is not None and tone.low < tone.estimate < tone.high
    assert tone.judge_alone > tone.estimate  # the demo's judge is kinder than its people
    # Sampled before grading: the graders graded drawn drafts only, after the draw, two alike per final grade
    # (the batch page's "grades in" and "final" agree with the PPI page's graded count).
    grades = session.exec(select(Grade).where(col(Grade.draft_id).in_([d.draft_id for d in draws]))).all()
    drawn = {d.draft_id for d in draws if d.drawn}
    assert {g.draft_id for g in grades} <= drawn and len(grades) == 2 * report.graded
    assert min(as_utc(g.created_at) for g in grades) >= max(as_utc(d.created_at) for d in draws)


def test_the_demo_ppi_run_is_graded_until_decided_and_the_sequence_decided(session: Session, spec: EvalSpec) -> None:
    from webapp.ppi.models import PpiDecision, PpiUntilDecided
    from webapp.ppi.until_decided import calls, draw_order

    run = session.exec(select(Run).where(Run.name == RUN_NAME)).one()
    assert run.id is not None
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).one()
    assert setting.set_by is not None and setting.closed_at is None  # three drawn drafts still wait in the queue
    order = draw_order(session=session, run_id=run.id)
    graded = {g.draft_id for g in session.exec(select(Grade).where(col(Grade.draft_id).in_(order))).all()}
    assert graded == set(order[: len(order) - LEFT_UNGRADED])  # graded in the queue's draw order
    decisions = session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id).order_by(col(PpiDecision.id))).all()
    held = [d for d in decisions if d.reopened_at is None]
    assert held, "the sequence decided at least one criterion"
    report = run_report(session=session, spec=spec, run_id=run.id)
    assert report is not None
    now = calls(spec, report)
    for d in held:
        # stored on the grade it rested on: at least 30 (no call before), those drafts the first graded in draw order
        assert 30 <= d.grades < report.graded and d.rested_on is not None and len(d.rested_on) == d.grades
        assert set(d.rested_on) == set(order[: d.grades]) and now[d.criterion].verdict == d.verdict
    for d in decisions:
        if d.reopened_at is not None:  # a later grade moved the sequence back over the threshold: recorded, with why
            assert d.reopen_reason is not None and "a further grade" in d.reopen_reason
