"""Reference responses of test cases: versions, approval and grades."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.auth import audit
from webapp.core.timeutil import as_utc, utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.errors import AlreadyApproved, GradeInvalid, NotAllowed, NotFound
from webapp.grading.evidence import CitedKbText, cited_kb_texts
from webapp.grading.item_reads import user_names
from webapp.grading.models import (
    ReferenceGrade,
    ReferenceVersion,
)
from webapp.grading.scores import Scores
from webapp.runs.models import Draft
from webapp.web.page_view import PageView


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
    """Approve a reference version (the lead): never their own, and only once.

    Four eyes: the lead who wrote a version cannot approve it (NotAllowed, 403); another lead does.
    An approved version stays approved by its first approver at its first time: approving it
    again is refused (AlreadyApproved, 409) rather than silently overwriting who vouched for it.
    """
    ref = session.get(ReferenceVersion, reference_id)
    if ref is None:
        raise NotFound(f"reference {reference_id} does not exist")
    if ref.author_id == lead_id:
        raise NotAllowed(
            f"reference {reference_id}: version {ref.version} was written by you; another lead approves it"
        )
    if ref.approved_at is not None:
        who = user_names(session=session, user_ids={ref.approved_by} if ref.approved_by else set())
        raise AlreadyApproved(
            f"reference {reference_id}: version {ref.version} is already approved"
            f" by {who.get(ref.approved_by or 0, 'another lead')} on {as_utc(ref.approved_at):%Y-%m-%d %H:%M} UTC"
        )
    ref.approved_by = lead_id
    ref.approved_at = now or utcnow()
    session.add(ref)
    session.flush()
    audit.record(
        session=session, action="reference.approve", actor_id=lead_id, subject_id=ref.author_id,
        target=f"case {ref.case_pk}", detail=f"reference {reference_id}, version {ref.version}",
    )  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
# The reference pages' views


@dataclass(frozen=True)
class ReferenceRow:
    """A test case on the references list: its latest reference version and where that stands."""

    case: EvalCase
    latest: ReferenceVersion | None
    state: str  # missing | to approve | approved
    has_approved: bool  # some version of it is approved


@dataclass(frozen=True)
class ReferencesView(PageView):
    """Test cases with the state of their reference (the first `limit` rows of `total`)."""

    rows: list[ReferenceRow]
    total: int
    show: str


def references_view(*, session: Session, show: str = "all", limit: int = 500) -> ReferencesView:
    """Return test cases with the state of their reference: missing, to approve, approved (show: all, to_approve, golden)."""
    latest: dict[int, ReferenceVersion] = {}
    approved: set[int] = set()
    for v in session.exec(select(ReferenceVersion).order_by(col(ReferenceVersion.version))):
        latest[v.case_pk] = v
        if v.approved_at is not None:
            approved.add(v.case_pk)
    cases = session.exec(select(EvalCase).order_by(col(EvalCase.dataset_id).desc(), col(EvalCase.position)))
    rows: list[ReferenceRow] = []
    for case in cases:
        v = latest.get(case.id) if case.id is not None else None
        state = "missing" if v is None else "approved" if v.approved_at is not None else "to approve"
        if show == "to_approve" and state != "to approve":
            continue
        if show == "golden" and not case.golden:
            continue
        rows.append(ReferenceRow(case=case, latest=v, state=state, has_approved=case.id in approved))
    return ReferencesView(rows=rows[:limit], total=len(rows), show=show)


@dataclass(frozen=True)
class ReferenceView(PageView):
    """A case's reference editor: the case, the draft it was opened from, the KB beside it, versions and their grades."""

    case: EvalCase
    draft: Draft | None
    kb: list[CitedKbText]
    versions: list[ReferenceVersion]
    ref_grades: dict[int, list[ReferenceGrade]]  # reference version id -> its grades
    users: dict[int, str]
    # the page's state, set by webapp.grading.reference_pages
    is_lead: bool = False
    me: int = 0
    flash: str | None = None
    error: str | None = None


def reference_view(*, session: Session, case_pk: int, draft_id: int | None = None) -> ReferenceView | None:
    """Return a case's reference editor: the case, the draft it was opened from, the KB beside it, versions and grades.

    The KB is the draft's cited revisions, else the case's articles (current). None when the case does not exist.
    """
    case = session.get(EvalCase, case_pk)
    if case is None:
        return None
    draft = session.get(Draft, draft_id) if draft_id is not None else None
    if draft is not None and draft.case_pk != case_pk:
        draft = None
    if draft is not None and draft.citations:
        kb = cited_kb_texts(session=session, citations=draft.citations)
    else:
        kb = cited_kb_texts(
            session=session, citations=[{"article_id": str(a)} for a in (case.kb_articles or [])]
        )
    versions = reference_versions(session=session, case_pk=case_pk)
    ref_grades: dict[int, list[ReferenceGrade]] = {}
    if versions:
        ids = [v.id for v in versions]
        for rg in session.exec(select(ReferenceGrade).where(col(ReferenceGrade.reference_id).in_(ids))):
            ref_grades.setdefault(rg.reference_id, []).append(rg)
    user_ids = {v.author_id for v in versions} | {v.approved_by for v in versions if v.approved_by}
    user_ids |= {rg.grader_id for grades in ref_grades.values() for rg in grades}
    return ReferenceView(
        case=case,
        draft=draft,
        kb=kb,
        versions=versions,
        ref_grades=ref_grades,
        users=user_names(session=session, user_ids=user_ids),
    )


def reference_case_of(*, session: Session, reference_id: int) -> int | None:
    """Return the test case of a reference version (None when there is no such version)."""
    ref = session.get(ReferenceVersion, reference_id)
    return ref.case_pk if ref is not None else None
