"""Issue 43, bad input: a grade corrected after a decision re-opens the call, recorded with who and when, through the
grading flow (the lead's adjudication, its "draft_finalised" fact and the reaction), and the decided run's queue opens again."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from fastapi.testclient import TestClient
from sqlmodel import Session, col, select

from tests.factories import make_user
from tests.ppi.test_until_decided import T0, grade, sampled_run
from webapp.core import reactions
from webapp.core.facts import Fact
from webapp.core.spec import EvalSpec
from webapp.grading.adjudication import resolve_adjudication
from webapp.grading.models import Adjudication, FinalGrade, Grade, GradeChange, GradingPlan
from webapp.grading.outcome import finalised
from webapp.grading.scores import Scores
from webapp.ppi.models import PpiDecision, PpiUntilDecided
from webapp.ppi.until_decided import on_final_grade, set_until_decided, who_saved


def test_a_lead_correcting_grades_after_the_decision_reopens_it_naming_the_lead_and_the_queue_opens(
    session: Session, spec: EvalSpec, api_as: Callable[..., TestClient]
) -> None:
    run, order = sampled_run(session)
    assert run.id is not None
    set_until_decided(session=session, run_id=run.id, now=T0)
    graded: list[int] = []
    for k, draft_id in enumerate(order):
        grade(session, draft_id)
        graded.append(draft_id)
        out = on_final_grade(session=session, spec=spec, draft_id=draft_id, now=T0 + dt.timedelta(minutes=k))
        assert out is not None
        if out.closed_reason:
            break
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).one()
    assert setting.closed_at is not None  # decided: closed
    tone = session.exec(select(PpiDecision).where(PpiDecision.run_id == run.id, PpiDecision.criterion == "tone")).one()
    assert tone.verdict == "pass"
    lead = make_user(session, email="corrector@example.test", roles=["lead"])
    assert lead.id is not None
    assert len(graded) == 30  # every grade 4 and the judge's tone 4: decided at the first look allowed
    # the lead corrects 5 tone grades to 1 through adjudications, as the adjudication page does (then its fact):
    # tone's mean is then (25 x 4 + 5) / 30 = 3.5 on the threshold, no call either way
    low = Scores(factual_accuracy="pass", citation_relevance=4, tone=1, completeness=4)
    for draft_id in graded[:5]:
        adj = Adjudication(draft_id=draft_id, status="open", reasons=["tone differs"])
        session.add(adj)
        session.flush()
        assert adj.id is not None
        resolve_adjudication(session=session, spec=spec, adjudication_id=adj.id, lead_id=lead.id, scores=low, note="tone misread")
        finalised(session, draft_id)
    reactions.run_in_session(session, spec)  # the reactions after commit, in this session
    session.expire_all()
    tone = session.get(PpiDecision, tone.id)
    assert tone is not None and tone.reopened_at is not None and tone.reopened_by == lead.id
    facts = session.exec(select(Fact).where(Fact.name == "draft_finalised")).all()
    # when: the time of the fact whose grade re-opened it, named in the reason
    (fact,) = [f for f in facts if tone.reopen_reason and f"draft {f.subject['draft_id']} " in tone.reopen_reason]
    assert tone.reopened_at.replace(tzinfo=dt.UTC) == fact.created_at.replace(tzinfo=dt.UTC)
    # undecided again: the run's queue serves the rest of the drawn drafts again
    setting = session.exec(select(PpiUntilDecided).where(PpiUntilDecided.run_id == run.id)).one()
    assert setting.closed_at is None and setting.closed_reason is None
    closed = session.exec(select(GradingPlan).where(GradingPlan.run_id == run.id, col(GradingPlan.closed_reason).is_not(None))).all()
    assert closed == []
    session.commit()
    body = api_as("lead").get(f"/api/v1/ppi/runs/{run.name}/until-decided").json()
    (c,) = [c for c in body["criteria"] if c["key"] == "tone"]
    assert not c["decided"] and c["decision"] is None
    (was,) = c["reopened"]
    assert was["verdict"] == "pass" and was["reopened_by"] == "corrector@example.test" and was["grades"] == tone.grades
    assert not body["closed"]


def test_who_saved_an_agreed_final_grade_is_the_grader_whose_change_came_last(session: Session, spec: EvalSpec) -> None:
    run, order = sampled_run(session)
    draft_id = order[0]
    a = make_user(session, email="ga@example.test", roles=["labeler"])
    b = make_user(session, email="gb@example.test", roles=["labeler"])
    assert a.id is not None and b.id is not None
    grades = []
    for user in (a, b):
        assert user.id is not None
        g = Grade(draft_id=draft_id, grader_id=user.id, factual_accuracy="pass", citation_relevance=4, tone=4, completeness=4)
        session.add(g)
        session.flush()
        grades.append(g)
    assert grades[0].id is not None and grades[1].id is not None
    session.add(GradeChange(grade_id=grades[0].id, changed_by=a.id, action="create", changed_at=T0))
    session.add(GradeChange(grade_id=grades[1].id, changed_by=b.id, action="create", changed_at=T0 + dt.timedelta(minutes=1)))
    session.add(GradeChange(grade_id=grades[0].id, changed_by=a.id, action="revise", changed_at=T0 + dt.timedelta(minutes=5)))
    final = grade(session, draft_id)  # by agreement: decided_by None
    assert who_saved(session=session, draft_id=draft_id, final=final) == a.id
    adjudicated = FinalGrade(
        draft_id=draft_id, factual_accuracy="pass", citation_relevance=4, tone=1, completeness=4, source="adjudication", decided_by=b.id
    )
    assert who_saved(session=session, draft_id=draft_id, final=adjudicated) == b.id
