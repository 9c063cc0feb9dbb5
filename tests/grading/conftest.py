"""Grading test data: a run of drafts over a small dataset, graders and a lead."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlmodel import Session

from tests.factories import make_article, make_dataset, make_run, make_user
from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.runs.models import Draft, Run
from webapp.spec import EvalSpec

DRAFT_TEXT = "Thanks for reaching out. You can reset your password from the sign-in page. We will refund you 200 dollars."


@dataclass
class GradingWorld:
    run: Run
    drafts: list[Draft]
    alice: User
    bob: User
    carol: User
    lead: User


def principal_of(user: User, *roles: str) -> Principal:
    """Return a Principal for a user with the given roles."""
    return Principal(user_id=user.id, email=user.email, name=user.name, roles=frozenset(roles))  # type: ignore[arg-type]


def build_world(session: Session, n_drafts: int = 6) -> GradingWorld:
    """Create KB articles, a dataset, a run with n gradable drafts plus one escalation, three labelers and a lead."""
    make_article(
        session,
        "KB-1",
        [(1, "deprecated"), (2, "current")],
        body="Reset your password from the sign-in page.",
    )
    cases = [
        {
            "case_id": f"case-{i}",
            "category": "routine" if i % 2 == 0 else "edge",
            "golden": i == 0,
            "intent": "password",
        }
        for i in range(n_drafts + 1)
    ]
    ds = make_dataset(session, cases)
    drafts = [
        {
            "case_id": f"case-{i}",
            "draft_text": DRAFT_TEXT,
            "confidence": 0.8,
            "citations": [{"article_id": "KB-1", "revision": 1}],
        }
        for i in range(n_drafts)
    ]
    drafts.append({"case_id": f"case-{n_drafts}", "draft_text": None, "escalated": True})
    run = make_run(session, ds, drafts)
    users = [
        make_user(session, email=f"{n}@example.test", roles=["labeler"], name=n.title())
        for n in ("alice", "bob", "carol")
    ]
    lead = make_user(session, email="lead@example.test", roles=["lead"], name="Lead")
    session.commit()
    from sqlmodel import col, select

    rows = list(session.exec(select(Draft).where(Draft.run_id == run.id).order_by(col(Draft.id))))
    return GradingWorld(
        run=run,
        drafts=[d for d in rows if not d.escalated],
        alice=users[0],
        bob=users[1],
        carol=users[2],
        lead=lead,
    )


@pytest.fixture
def world(session: Session) -> GradingWorld:
    return build_world(session)


def scores(spec: EvalSpec, factual: str = "pass", cr: int = 4, tone: int = 4, comp: int = 4, **extra: object):  # type: ignore[no-untyped-def]
    """Return validated Scores."""
    from webapp.grading.scores import validate_scores

    data = {
        "factual_accuracy": factual,
        "citation_relevance": cr,
        "tone": tone,
        "completeness": comp,
        "rationale": "ok",
    }
    if factual == "fail":
        data["unsupported_claim"] = "We will refund you 200 dollars."
    data.update(extra)
    return validate_scores(spec=spec, data=data)


def disagree(session: Session, spec: EvalSpec, world: GradingWorld) -> list:  # type: ignore[type-arg]
    """Have Alice (tone 1) and Bob (tone 5) grade the first draft, which opens an adjudication; return both grades."""
    from webapp.grading.grades import record_grade

    return [
        record_grade(
            session=session,
            spec=spec,
            draft_id=world.drafts[0].id,
            grader_id=user.id,
            scores=scores(spec, tone=tone),
        )
        for user, tone in ((world.alice, 1), (world.bob, 5))
    ]
