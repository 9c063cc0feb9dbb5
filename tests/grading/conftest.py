"""Grading test data: a run of drafts over a small dataset, graders and a lead; shared grading helpers."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlmodel import Session, col, select

from tests.conftest import csrf_for
from tests.factories import make_article, make_dataset, make_run, make_user
from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.grading.grades import record_grade, revise_grade
from webapp.grading.models import Grade
from webapp.grading.scores import validate_scores
from webapp.runs.models import Draft, Run

DRAFT_TEXT = "Thanks for reaching out. You can reset your password from the sign-in page. We will refund you 200 dollars."
# The grading form's fields as a browser posts them.
FORM = {
    "factual_accuracy": "pass", "citation_relevance": "4", "tone": "4", "completeness": "4", "rationale": "ok"
}
HX = {"HX-Request": "true"}


@dataclass
class GradingWorld:
    run: Run
    drafts: list[Draft]
    alice: User
    bob: User
    carol: User
    lead: User


def principal_of(user: User, *roles: str) -> Principal:
    return Principal(user_id=user.id, email=user.email, name=user.name, roles=frozenset(roles))  # type: ignore[arg-type]


def build_world(session: Session, n_drafts: int = 6) -> GradingWorld:
    """Create KB articles, a dataset, a run with n gradable drafts plus one escalation, three labelers and a lead."""
    body = "Reset your password from the sign-in page."
    make_article(session, "KB-1", [(1, "deprecated"), (2, "current")], body=body)
    cases = [
        dict(case_id=f"case-{i}", category=("routine", "edge")[i % 2], golden=i == 0, intent="password")
        for i in range(n_drafts + 1)
    ]
    ds = make_dataset(session, cases)
    citations = [{"article_id": "KB-1", "revision": 1}]
    drafts = [
        {"case_id": f"case-{i}", "draft_text": DRAFT_TEXT, "confidence": 0.8, "citations": citations}
        for i in range(n_drafts)
    ]
    drafts.append({"case_id": f"case-{n_drafts}", "draft_text": None, "escalated": True})
    run = make_run(session, ds, drafts)
    alice, bob, carol = (
        make_user(session, email=f"{n}@example.test", roles=["labeler"], name=n.title())
        for n in ("alice", "bob", "carol")
    )
    lead = make_user(session, email="lead@example.test", roles=["lead"], name="Lead")
    session.commit()
    rows = session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id)))
    return GradingWorld(run, [d for d in rows if not d.escalated], alice, bob, carol, lead)


@pytest.fixture
def world(session: Session) -> GradingWorld:
    return build_world(session)


def scores(  # type: ignore[no-untyped-def]
    spec: EvalSpec, factual: str = "pass", cr: int = 4, tone: int = 4, comp: int = 4, **extra: object
):
    """Return validated Scores; a factual fail quotes the draft's refund promise."""
    data: dict[str, object] = dict(factual_accuracy=factual, citation_relevance=cr, tone=tone)
    data.update(completeness=comp, rationale="ok")
    if factual == "fail":
        data["unsupported_claim"] = "We will refund you 200 dollars."
    data.update(extra)
    return validate_scores(spec=spec, data=data)


def grade(
    session: Session, spec: EvalSpec, world: GradingWorld, user: User, draft_index: int = 0,
    now: dt.datetime | None = None, **kw: object,
) -> Grade:
    """Record `user`'s first grade of the world's draft `draft_index` with scores(spec, **kw)."""
    draft_id = world.drafts[draft_index].id
    return record_grade(  # type: ignore[arg-type]
        session=session, spec=spec, draft_id=draft_id, grader_id=user.id, scores=scores(spec, **kw), now=now
    )


def revise(session: Session, spec: EvalSpec, g: Grade, user: User, **kw: object) -> Grade:
    return revise_grade(  # type: ignore[arg-type]
        session=session, spec=spec, grade_id=g.id, grader_id=user.id, scores=scores(spec, **kw)
    )


def grade_pair(session: Session, spec: EvalSpec, world: GradingWorld, **kw: object) -> list[Grade]:
    """Alice and Bob give the first draft the same grade (they agree: it gets a final grade); commit."""
    grades = [grade(session, spec, world, user, **kw) for user in (world.alice, world.bob)]
    session.commit()
    return grades


def disagree(session: Session, spec: EvalSpec, world: GradingWorld) -> list[Grade]:
    """Alice (tone 1) and Bob (tone 5) grade the first draft, which opens an adjudication."""
    return [grade(session, spec, world, u, tone=tone) for u, tone in ((world.alice, 1), (world.bob, 5))]


def post_form(
    c: TestClient, url: str, data: dict[str, str], headers: dict[str, str] | None = None
) -> Response:
    """Post a form with the client's CSRF token, without following the redirect."""
    body = {**data, "csrf_token": csrf_for(c)}
    return c.post(url, data=body, headers=headers or {}, follow_redirects=False)
