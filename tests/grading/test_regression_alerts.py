"""A golden example graded factual "fail" raises a regression alert at once, not at the next check."""

from __future__ import annotations

from sqlmodel import Session, select

from tests.factories import make_article, make_dataset, make_run, make_user, words
from webapp.flows import after_grading
from webapp.grading.grades import record_grade
from webapp.grading.scores import validate_scores
from webapp.regression.models import RegressionAlert
from webapp.runs.models import Draft
from webapp.spec import EvalSpec

FAIL = {
    "factual_accuracy": "fail",
    "citation_relevance": 3,
    "tone": 4,
    "completeness": 4,
    "rationale": "promises a refund",
    "unsupported_claim": "processed your refund",
}


def _draft(session: Session, golden: bool) -> int:
    make_article(session, "KB-1")
    ds = make_dataset(
        session, [{"case_id": "g", "category": "routine", "intent": "refund_request", "golden": golden}]
    )
    text = "I've processed your refund and you should see it soon. " + words(60)
    run = make_run(
        session,
        ds,
        [
            {
                "case_id": "g",
                "draft_text": text,
                "confidence": 0.8,
                "intent": "refund_request",
                "citations": [{"article_id": "KB-1", "revision": 1}],
            }
        ],
    )
    return session.exec(select(Draft.id).where(Draft.run_id == run.id)).one()


def _grade_twice(session: Session, spec: EvalSpec, draft_id: int, scores: dict) -> None:
    for i in (1, 2):
        g = make_user(session, email=f"g{i}@example.test", roles=["labeler"])
        record_grade(
            session=session,
            spec=spec,
            draft_id=draft_id,
            grader_id=g.id,
            scores=validate_scores(spec=spec, data=scores),
        )
        after_grading(session=session, spec=spec, draft_id=draft_id)  # what routes, pages and the demo call


def test_golden_factual_fail_raises_an_alert(session: Session, spec: EvalSpec) -> None:
    draft_id = _draft(session, golden=True)
    _grade_twice(session, spec, draft_id, FAIL)
    alerts = session.exec(select(RegressionAlert)).all()
    assert len(alerts) == 1 and alerts[0].kind == "golden_factual" and "g" in alerts[0].message


def test_non_golden_or_passing_grades_raise_nothing(session: Session, spec: EvalSpec) -> None:
    draft_id = _draft(session, golden=False)
    _grade_twice(session, spec, draft_id, FAIL)
    assert session.exec(select(RegressionAlert)).all() == []
