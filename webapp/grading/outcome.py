"""A draft's outcome from its grades: needs grades, rework, in adjudication, or a final grade."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session, col, select

from webapp.db import table_of
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
)
from webapp.grading.scores import FACTUAL_KEY, all_reasons
from webapp.spec import EvalSpec
from webapp.timeutil import utcnow


def upsert_final(session: Session, draft_id: int, values: dict[str, Any]) -> FinalGrade:
    """Set the draft's final grade (insert or update); callers run webapp.flows.after_grading afterwards."""
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    if final is None:
        final = FinalGrade(draft_id=draft_id, **values)
    else:
        for key, value in values.items():
            setattr(final, key, value)
    session.add(final)
    session.flush()
    return final


_GRADES = table_of(Grade)
_ADJUDICATIONS = table_of(Adjudication)
# How many grades the draft has, how many were returned, and its adjudication's status: enough to
# tell "still needs grades" (most saves) without loading anything.
_SHORT_OF_GRADES = core_select(
    core_select(func.count()).where(_GRADES.c.draft_id == bindparam("draft_id")).scalar_subquery(),
    core_select(func.count())
    .where(_GRADES.c.draft_id == bindparam("draft_id"), _GRADES.c.status == "returned")
    .scalar_subquery(),
    core_select(_ADJUDICATIONS.c.status)
    .where(_ADJUDICATIONS.c.draft_id == bindparam("draft_id"))
    .scalar_subquery(),
)


def evaluate_draft(*, session: Session, spec: EvalSpec, draft_id: int, now: dt.datetime | None = None) -> str:
    """Recompute a draft's outcome from its grades; return needs_grades, rework, in_adjudication or final."""
    now = now or utcnow()
    n_grades, n_returned, status = (
        session.connection().execute(_SHORT_OF_GRADES, {"draft_id": draft_id}).one()
    )
    if status == "resolved":
        return "final"
    if not n_returned and n_grades < spec.grading.graders_per_draft:
        return "needs_grades"
    adjudication = session.exec(select(Adjudication).where(Adjudication.draft_id == draft_id)).first()
    if adjudication is not None and adjudication.status == "resolved":
        return "final"
    grades = list(session.exec(select(Grade).where(Grade.draft_id == draft_id).order_by(col(Grade.id))))
    final = session.exec(select(FinalGrade).where(FinalGrade.draft_id == draft_id)).first()
    if any(g.status == "returned" for g in grades):
        if adjudication is not None:
            adjudication.status = "rework"
            session.add(adjudication)
        return "rework"
    if len(grades) < spec.grading.graders_per_draft:
        return "needs_grades"
    reasons = all_reasons(spec, grades)
    if not reasons and adjudication is not None and adjudication.status == "open":
        # Only the revision of a grade the lead returned (status "rework") may dissolve a disagreement.
        return "in_adjudication"
    if not reasons:
        n = len(grades)
        upsert_final(
            session,
            draft_id,
            {
                FACTUAL_KEY: "pass" if all(g.factual_accuracy == "pass" for g in grades) else "fail",
                "citation_relevance": sum(g.citation_relevance for g in grades) / n,
                "tone": sum(g.tone for g in grades) / n,
                "completeness": sum(g.completeness for g in grades) / n,
                "source": "agreement",
                "decided_by": None,
                "note": None,
                "decided_at": now,
            },
        )
        if adjudication is not None and adjudication.status in ("open", "rework"):
            adjudication.status = "dissolved"  # the reworked grades now agree: no decision needed
            adjudication.resolved_at = now
            session.add(adjudication)
        session.flush()
        return "final"
    if final is not None:
        session.delete(final)  # a revision broke an earlier agreement
    if adjudication is None:
        adjudication = Adjudication(draft_id=draft_id, opened_at=now)
    adjudication.status = "open"
    adjudication.reasons = reasons
    adjudication.resolved_at = None
    session.add(adjudication)
    session.flush()
    return "in_adjudication"
