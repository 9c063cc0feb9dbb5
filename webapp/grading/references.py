"""Reference responses of test cases: versions, approval and grades."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.datasets.models import EvalCase
from webapp.grading.errors import GradeInvalid, NotFound
from webapp.grading.models import (
    ReferenceGrade,
    ReferenceVersion,
)
from webapp.grading.scores import Scores
from webapp.timeutil import utcnow


def reference_versions(*, session: Session, case_pk: int) -> list[ReferenceVersion]:
    """Return every version of a case's reference response, newest first."""
    return list(
        session.exec(
            select(ReferenceVersion)
            .where(ReferenceVersion.case_pk == case_pk)
            .order_by(col(ReferenceVersion.version).desc())
        )
    )


def current_reference(*, session: Session, case_pk: int) -> ReferenceVersion | None:
    """Return the latest approved version of a case's reference, or else its latest version."""
    versions = reference_versions(session=session, case_pk=case_pk)
    approved = [v for v in versions if v.approved_at is not None]
    return approved[0] if approved else (versions[0] if versions else None)


def save_reference(
    *,
    session: Session,
    case_pk: int,
    author_id: int,
    text: str,
    note: str = "",
    now: dt.datetime | None = None,
) -> ReferenceVersion:
    """Save a new version of a case's reference response (every edit is kept)."""
    now = now or utcnow()
    text = (text or "").strip()
    if not text:
        raise GradeInvalid("text: the reference response is empty", field="text")
    if session.get(EvalCase, case_pk) is None:
        raise NotFound(f"test case {case_pk} does not exist")
    latest = session.exec(
        select(func.max(ReferenceVersion.version)).where(ReferenceVersion.case_pk == case_pk)
    ).one()
    version = ReferenceVersion(
        case_pk=case_pk,
        version=(latest or 0) + 1,
        text=text,
        note=note.strip()[:500],
        author_id=author_id,
        created_at=now,
    )
    session.add(version)
    session.flush()
    return version


def approve_reference(
    *, session: Session, reference_id: int, lead_id: int, now: dt.datetime | None = None
) -> ReferenceVersion:
    """Approve a reference version (the lead)."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise NotFound(f"reference {reference_id} does not exist")
    ref.approved_by = lead_id
    ref.approved_at = now or utcnow()
    session.add(ref)
    session.flush()
    return ref


def references_to_approve(*, session: Session) -> list[ReferenceVersion]:
    """Return, per case, its latest reference version when that one is not approved."""
    latest = (
        select(ReferenceVersion.case_pk, func.max(ReferenceVersion.version).label("v"))
        .group_by(col(ReferenceVersion.case_pk))
        .subquery()
    )
    stmt = (
        select(ReferenceVersion)
        .join(
            latest,
            (col(ReferenceVersion.case_pk) == latest.c.case_pk)
            & (col(ReferenceVersion.version) == latest.c.v),
        )
        .where(col(ReferenceVersion.approved_at).is_(None))
        .order_by(col(ReferenceVersion.case_pk))
    )
    return list(session.exec(stmt))


def grade_reference(
    *, session: Session, reference_id: int, grader_id: int, scores: Scores, now: dt.datetime | None = None
) -> ReferenceGrade:
    """Grade a reference version against the rubric (once per grader; a second grade replaces the first)."""
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise NotFound(f"reference {reference_id} does not exist")
    row = session.exec(
        select(ReferenceGrade).where(
            ReferenceGrade.reference_id == reference_id, ReferenceGrade.grader_id == grader_id
        )
    ).first()
    if row is None:
        row = ReferenceGrade(reference_id=reference_id, grader_id=grader_id, **scores.as_dict())
    else:
        for key, value in scores.as_dict().items():
            setattr(row, key, value)
    row.created_at = now or utcnow()
    session.add(row)
    session.flush()
    return row


