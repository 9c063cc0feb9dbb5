"""Adjudication of disagreements: the lead's final grade, or a grade returned for rework."""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session, col, select

from webapp.grading.errors import GradeInvalid, GradeLocked, NotFound
from webapp.grading.grades import add_history, lock_draft
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
)
from webapp.grading.outcome import upsert_final
from webapp.grading.scores import FACTUAL_KEY, Scores, scores_of
from webapp.spec import EvalSpec
from webapp.timeutil import utcnow


def list_adjudications(*, session: Session, status: str | None = "open") -> list[Adjudication]:
    """Return adjudications with the status (all when None), oldest first."""
    stmt = select(Adjudication)
    if status:
        stmt = stmt.where(Adjudication.status == status)
    return list(session.exec(stmt.order_by(col(Adjudication.opened_at), col(Adjudication.id))))


def resolve_adjudication(
    *,
    session: Session,
    spec: EvalSpec,
    adjudication_id: int,
    lead_id: int,
    scores: Scores,
    note: str,
    now: dt.datetime | None = None,
) -> FinalGrade:
    """Set the final grade of a disagreeing draft with the lead's note; its grades are then locked."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    if adj is None:
        raise NotFound(f"adjudication {adjudication_id} does not exist")
    lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    note = (note or "").strip()
    if not note:
        raise GradeInvalid("note: explain the decision in a note", field="note")
    final = upsert_final(
        session,
        adj.draft_id,
        {
            FACTUAL_KEY: scores.factual_accuracy,
            "citation_relevance": float(scores.citation_relevance),
            "tone": float(scores.tone),
            "completeness": float(scores.completeness),
            "source": "adjudication",
            "decided_by": lead_id,
            "note": note,
            "decided_at": now,
        },
    )
    adj.status = "resolved"
    adj.note = note
    adj.resolved_at = now
    adj.resolved_by = lead_id
    session.add(adj)
    session.flush()
    return final


def return_grade(
    *,
    session: Session,
    adjudication_id: int,
    grade_id: int,
    lead_id: int,
    comment: str,
    now: dt.datetime | None = None,
) -> Grade:
    """Send one grade of a disagreeing draft back to its grader with a comment; it shows in their queue."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    grade = session.get(Grade, grade_id)
    if adj is None or grade is None or grade.draft_id != adj.draft_id:
        raise NotFound(f"grade {grade_id} is not part of adjudication {adjudication_id}")
    lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    comment = (comment or "").strip()
    if not comment:
        raise GradeInvalid("comment: tell the grader what to look at again", field="comment")
    before = scores_of(grade)
    grade.status = "returned"
    grade.return_comment = comment
    grade.updated_at = now
    session.add(grade)
    session.flush()
    add_history(session, grade, lead_id, "return", before, comment, now)
    adj.status = "rework"
    session.add(adj)
    session.flush()
    return grade


