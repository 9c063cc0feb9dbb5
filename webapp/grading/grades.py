"""Grades: record and revise, the lock rule, blind visibility, history, Previous."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import ColumnElement, ScalarSelect, Table, bindparam, exists, insert, update
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.sql import Executable
from sqlmodel import Session, col, select

from webapp.auth import audit
from webapp.auth.service import Principal
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.grading.errors import (
    AlreadyGraded,
    GradeLocked,
    GradesHidden,
    NoPlaceLeft,
    NotAllowed,
    NotFound,
    NotGradable,
)
from webapp.grading.models import (
    Adjudication,
    Grade,
    GradeAction,
    GradeChange,
)
from webapp.grading.outcome import evaluate_draft
from webapp.grading.queue import IS_GRADABLE, claim_slot, insert_ignore
from webapp.grading.queue_statements import DRAFTS, GRADES, PLAN, SLOTS
from webapp.grading.scores import Scores, ScoreValues, check_claim_in_draft, scores_of
from webapp.runs.models import Draft

ADJUDICATIONS = table_of(Adjudication)
CHANGES = table_of(GradeChange)


# ---------------------------------------------------------------------------------------------
# The rules (one copy each; pages, the API and exports call these)


def sees_all_grades(*, principal: Principal, has_own_grade: bool) -> bool:
    """Blind grading: the caller sees other grades of a draft once they have graded it (the lead always)."""
    return has_own_grade or principal.has_role("lead")


def lock_reason(*, draft_id: int, adjudication_status: str | None, grade_status: str | None) -> str | None:
    """Return why a grade of the draft cannot be revised now (None when its grader may revise it).

    Once the lead resolved the draft, no grade changes. While its grades disagree and the
    adjudication is open (or in rework), only a grade the lead returned for rework may change:
    otherwise a grader who has seen the other grade could copy it and end the disagreement.
    """
    if adjudication_status == "resolved":
        return f"draft {draft_id} has been adjudicated; its grades can no longer change"
    if adjudication_status in ("open", "rework") and grade_status != "returned":
        return (
            f"the grades of draft {draft_id} disagree and wait for the lead: the lead decides or returns "
            "this grade for rework, and only a returned grade can be revised"
        )
    return None


def draft_locked(*, session: Session, draft_id: int) -> bool:
    """Tell whether the draft's grades can no longer change (the lead has adjudicated it)."""
    return is_adjudicated(session, draft_id)


_ADD_CHANGE = insert(CHANGES)


def add_history(
    session: Session,
    grade: Grade,
    by: int,
    action: GradeAction,
    before: ScoreValues | None,
    comment: str | None,
    now: dt.datetime,
) -> None:
    """Add a change of a grade to its history (the scores after it, and before it unless it is the first)."""
    assert grade.id is not None
    session.add(
        GradeChange(
            grade_id=grade.id,
            changed_by=by,
            action=action,
            before=before,
            after=scores_of(grade),
            comment=comment,
            changed_at=now,
        )
    )


_ADJUDICATION_STATUS = core_select(ADJUDICATIONS.c.status).where(
    ADJUDICATIONS.c.draft_id == bindparam("draft_id")
)


def adjudication_status(session: Session, draft_id: int) -> str | None:
    """Return the status of the draft's adjudication (None when its grades never disagreed)."""
    return session.connection().execute(_ADJUDICATION_STATUS, {"draft_id": draft_id}).scalar()


def is_adjudicated(session: Session, draft_id: int) -> bool:
    """Tell whether the lead has resolved the draft's disagreement."""
    return adjudication_status(session, draft_id) == "resolved"


def grade_lock(*, session: Session, grade: Grade) -> str | None:
    """Return why the grade cannot be revised now (None when its grader may revise it).

    Once the lead resolved the draft, no grade changes. While its grades disagree and the
    adjudication is open (or in rework), only a grade the lead returned for rework may change:
    otherwise a grader who has seen the other grade could copy it and end the disagreement.
    """
    return lock_reason(
        draft_id=grade.draft_id,
        adjudication_status=adjudication_status(session, grade.draft_id),
        grade_status=grade.status,
    )


_WHY_NOT = core_select(
    DRAFTS.c.run_id,
    DRAFTS.c.escalated,
    DRAFTS.c.draft_text.is_(None),
    core_select(PLAN.c.draft_id).where(PLAN.c.draft_id == DRAFTS.c.id).exists(),
    core_select(PLAN.c.closed_reason).where(PLAN.c.draft_id == DRAFTS.c.id).scalar_subquery(),
).where(DRAFTS.c.id == bindparam("draft_id"))


def not_gradable_reason(*, session: Session, draft_id: int) -> str:
    """Say why `gradable` leaves a draft out of every queue (only asked once IS_GRADABLE said it does)."""
    row = session.connection().execute(_WHY_NOT, {"draft_id": draft_id}).one()
    run_id, escalated, no_text, drawn, closed = row
    if escalated:
        return f"draft {draft_id} is an escalation: there is no draft text to grade"
    if no_text:
        return f"draft {draft_id} is a fallback (no draft was shown, the confidence was too low): there is nothing to grade"
    if closed is not None:
        return f"draft {draft_id} is no longer graded: run {run_id} graded until decided and closed ({closed})"
    assert not drawn
    return (
        f"draft {draft_id} was not drawn in run {run_id}'s sample: only the drafts the sample drew are graded, as the "
        "grading queue offers them (a team lead can draw a further sample on the run's intervals page)"
    )


_LOCK_DRAFT = (
    core_select(DRAFTS.c.id, DRAFTS.c.run_id, DRAFTS.c.case_pk, DRAFTS.c.draft_text, DRAFTS.c.confidence)
    .where(DRAFTS.c.id == bindparam("draft_id"))
    .with_for_update(key_share=True)
)


@dataclass(frozen=True)
class LockedDraft:
    """The draft whose row a grade's transaction locked: what saving the grade needs of it."""

    id: int
    run_id: int
    case_pk: int
    draft_text: str | None
    confidence: float | None


def lock_draft(session: Session, draft_id: int) -> LockedDraft | None:
    """Lock the draft's row for this transaction so grades of one draft are evaluated one at a time.

    PostgreSQL takes a row lock (FOR NO KEY UPDATE); SQLite ignores it, but there the first write of a
    transaction takes the database's single write lock, which serialises the same work. NO KEY
    UPDATE, not UPDATE: the same transaction reserves the grader's next draft, and that insert's
    foreign-key check takes KEY SHARE on the other draft's row. Under FOR UPDATE two graders saving
    drafts X and Y while each reserves the other's draft would deadlock; NO KEY UPDATE still
    serialises the grades of one draft but lets those reservations through.
    """
    row = session.connection().execute(_LOCK_DRAFT, {"draft_id": draft_id}).first()
    return LockedDraft(*row) if row is not None else None


def _mine(column: ColumnElement[int], table: Table) -> ScalarSelect[int]:
    return (
        core_select(column)
        .where(table.c.draft_id == bindparam("draft_id"), table.c.grader_id == bindparam("grader_id"))
        .scalar_subquery()
    )


# Before a first grade, in one statement: the grader's place (id, grade) and grade of the draft, and its adjudication.
_BEFORE_GRADE = core_select(
    _mine(SLOTS.c.id, SLOTS),
    _mine(SLOTS.c.grade_id, SLOTS),
    _mine(GRADES.c.id, GRADES),
    core_select(ADJUDICATIONS.c.status)
    .where(ADJUDICATIONS.c.draft_id == bindparam("draft_id"))
    .scalar_subquery(),
    IS_GRADABLE,
)
_TAKE_SLOT = (
    update(SLOTS)
    .where(SLOTS.c.id == bindparam("slot_id"))
    .values(grade_id=bindparam("grade_id"), expires_at=None)
)


@lru_cache(maxsize=8)
def _insert_if_reserved_stmt(dialect: str, columns: tuple[str, ...]) -> Executable:
    """The grade, inserted only where the grader holds an unused place and the lead has not resolved the draft.

    (Parameters are named v_<column>: an INSERT may not reuse a column's name for its own.)
    """
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    held = exists().where(
        SLOTS.c.draft_id == bindparam("v_draft_id"),
        SLOTS.c.grader_id == bindparam("v_grader_id"),
        SLOTS.c.grade_id.is_(None),
    )
    resolved = exists().where(
        ADJUDICATIONS.c.draft_id == bindparam("v_draft_id"), ADJUDICATIONS.c.status == "resolved"
    )
    row = core_select(*(bindparam(f"v_{name}", type_=GRADES.c[name].type) for name in columns))
    return (
        insert(GRADES)
        .from_select(list(columns), row.where(held, ~resolved))
        .on_conflict_do_nothing()
        .returning(GRADES.c.id)
    )


def record_grade(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    grader_id: int,
    scores: Scores,
    now: dt.datetime | None = None,
) -> Grade:
    """Record a grader's first grade of a draft; raise AlreadyGraded, NoPlaceLeft, GradeLocked or NotFound."""
    return _record(
        session=session, spec=spec, draft_id=draft_id, grader_id=grader_id, scores=scores, now=now
    )[0]


def _record(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    grader_id: int,
    scores: Scores,
    now: dt.datetime | None = None,
) -> tuple[Grade, LockedDraft, str]:
    """record_grade, returning the locked draft's row (id, run_id, case_pk, draft_text, confidence) and the draft's outcome too."""
    now = now or utcnow()
    values = {
        "draft_id": draft_id,
        "grader_id": grader_id,
        **scores.as_dict(),
        "status": "submitted",
        "created_at": now,
        "updated_at": now,
    }
    # The lock first, then what the grade needs to know and the grade itself where the grader
    # holds a place, as most saves do. Where the checks below refuse it, the write section rolls
    # the insert back.
    draft = lock_draft(session, draft_id)
    conn = session.connection()
    before = conn.execute(_BEFORE_GRADE, {"draft_id": draft_id, "grader_id": grader_id}).one()
    inserted = _insert_if_reserved_stmt(session.get_bind().dialect.name, tuple(values))
    grade_id: int | None = conn.execute(inserted, {f"v_{k}": v for k, v in values.items()}).scalar()
    if draft is None:
        raise NotFound(f"draft {draft_id} does not exist")
    slot_id, slot_grade, existing, adjudication, is_gradable = before
    if not is_gradable:
        # The queue's rule (queue.gradable), applied to a save by id too: nobody grades outside the queue.
        raise NotGradable(not_gradable_reason(session=session, draft_id=draft_id))
    check_claim_in_draft(draft.draft_text, scores)
    if existing is not None:
        raise AlreadyGraded(f"you already graded draft {draft_id}; revise grade {existing} instead")
    if adjudication == "resolved":
        raise GradeLocked(f"draft {draft_id} has been adjudicated")
    # A grader usually saves the draft reserved for them: that place is used as it is (it is taken
    # by the grade at once, so extending the reservation first would be wasted work).
    if slot_id is None:
        slot = claim_slot(session=session, spec=spec, draft_id=draft_id, grader_id=grader_id, now=now)
        if slot is None:
            raise NoPlaceLeft(
                f"draft {draft_id} already has the {spec.grading.graders_per_draft} graders it needs; take the next item"
            )
        slot_id, slot_grade = slot.id, slot.grade_id
        if slot_grade is None:
            grade_id = insert_ignore(session, GRADES, values)
    if slot_grade is not None or grade_id is None:
        raise AlreadyGraded(f"you already graded draft {draft_id}")
    conn.execute(_TAKE_SLOT, {"slot_id": slot_id, "grade_id": grade_id})
    grade = _join_created(session, Grade(id=grade_id, **values), now)
    outcome = evaluate_draft(session=session, spec=spec, draft_id=draft_id, now=now)
    audit.record(session=session, action="grade.save", actor_id=grader_id, target=f"draft {draft_id}", detail=f"grade {grade_id}")
    return grade, draft, outcome


def _join_created(session: Session, grade: Grade, now: dt.datetime) -> Grade:
    """Add the grade just inserted to the session as if loaded (no SELECT back), and its "create" to the history."""
    make_transient_to_detached(grade)
    session.add(grade)
    session.connection().execute(
        _ADD_CHANGE,
        {
            "grade_id": grade.id,
            "changed_by": grade.grader_id,
            "action": "create",
            "before": None,
            "after": scores_of(grade),
            "comment": None,
            "changed_at": now,
        },
    )
    return grade


def revise_grade(
    *,
    session: Session,
    spec: EvalSpec,
    grade_id: int,
    grader_id: int,
    scores: Scores,
    now: dt.datetime | None = None,
) -> Grade:
    """Change one's own grade (not while the lead adjudicates it, unless returned), keeping the change in the history."""
    now = now or utcnow()
    grade = session.get(Grade, grade_id)
    if grade is None:
        raise NotFound(f"grade {grade_id} does not exist")
    if grade.grader_id != grader_id:
        raise NotAllowed("you can only revise your own grade")
    lock_draft(session, grade.draft_id)
    session.refresh(grade)
    reason = grade_lock(session=session, grade=grade)
    if reason is not None:
        raise GradeLocked(reason)
    if not session.connection().execute(core_select(IS_GRADABLE), {"draft_id": grade.draft_id}).scalar():
        raise NotGradable(not_gradable_reason(session=session, draft_id=grade.draft_id))
    draft = session.get(Draft, grade.draft_id)
    assert draft is not None
    check_claim_in_draft(draft.draft_text, scores)
    before = scores_of(grade)
    for key, value in scores.as_dict().items():
        setattr(grade, key, value)
    was_returned = grade.status == "returned"
    grade.status = "submitted"
    grade.updated_at = now
    session.add(grade)
    session.flush()
    if before != scores_of(grade) or was_returned:
        add_history(session, grade, grader_id, "revise", before, "rework" if was_returned else None, now)
    session.flush()
    evaluate_draft(session=session, spec=spec, draft_id=grade.draft_id, now=now)
    audit.record(
        session=session, action="grade.save", actor_id=grader_id, target=f"draft {grade.draft_id}",
        detail=f"grade {grade_id} revised",
    )  # fmt: skip
    return grade


def own_grade(*, session: Session, draft_id: int, grader_id: int) -> Grade | None:
    """Return the grader's grade of the draft, if any."""
    return session.exec(select(Grade).where(Grade.draft_id == draft_id, Grade.grader_id == grader_id)).first()


def can_see_grades(*, session: Session, draft_id: int, principal: Principal) -> bool:
    """Tell whether the caller may see all grades of the draft (the lead, or a grader who has graded it)."""
    if sees_all_grades(principal=principal, has_own_grade=False):
        return True
    has_own = own_grade(session=session, draft_id=draft_id, grader_id=principal.user_id) is not None
    return sees_all_grades(principal=principal, has_own_grade=has_own)


def grades_visible_to(*, session: Session, draft_id: int, principal: Principal) -> list[Grade]:
    """Return every grade of the draft, or raise GradesHidden while the caller has not graded it (blind)."""
    if session.get(Draft, draft_id) is None:
        raise NotFound(f"draft {draft_id} does not exist")
    if not can_see_grades(session=session, draft_id=draft_id, principal=principal):
        raise GradesHidden("grading is blind: submit your own grade of this draft before you see others'")
    return list(session.exec(select(Grade).where(Grade.draft_id == draft_id).order_by(col(Grade.id))))


def grade_history(
    *, session: Session, draft_id: int, principal: Principal, can_see: bool | None = None
) -> list[GradeChange]:
    """Return the changes of the draft's grades the caller may see (own only, until blind ends), oldest first.

    `can_see` is can_see_grades() when the caller has worked it out already.
    """
    stmt = (
        select(GradeChange)
        .join(Grade, col(Grade.id) == GradeChange.grade_id)
        .where(Grade.draft_id == draft_id)
    )
    if can_see is None:
        can_see = can_see_grades(session=session, draft_id=draft_id, principal=principal)
    if not can_see:
        stmt = stmt.where(Grade.grader_id == principal.user_id)
    return list(session.exec(stmt.order_by(col(GradeChange.changed_at), col(GradeChange.id))))


def returned_grades(*, session: Session, grader_id: int) -> list[Grade]:
    """Return the grader's grades the lead sent back for rework."""
    return list(
        session.exec(
            select(Grade)
            .where(Grade.grader_id == grader_id, Grade.status == "returned")
            .order_by(col(Grade.id))
        )
    )


@dataclass(frozen=True)
class Saved:
    """What save_grade did: the grade, whether it is new, the draft's run and confidence, and its outcome now.

    `outcome` is evaluate_draft's for a new grade (needs_grades, rework, in_adjudication, final), None for a revision.
    """

    grade: Grade
    created: bool
    run_id: int
    confidence: float | None
    outcome: str | None = None


def save_grade(*, session: Session, spec: EvalSpec, draft_id: int, grader_id: int, scores: Scores) -> Saved:
    """Record the grader's grade of the draft, or revise theirs if they graded it already."""
    try:
        grade, draft, outcome = _record(
            session=session, spec=spec, draft_id=draft_id, grader_id=grader_id, scores=scores
        )
        return Saved(
            grade=grade, created=True, run_id=int(draft.run_id), confidence=draft.confidence, outcome=outcome
        )
    except AlreadyGraded:
        own = own_grade(session=session, draft_id=draft_id, grader_id=grader_id)
        if own is None or own.id is None:
            raise
        grade = revise_grade(session=session, spec=spec, grade_id=own.id, grader_id=grader_id, scores=scores)
        draft = session.get(Draft, draft_id)  # loaded by revise_grade: no query
        assert draft is not None
        return Saved(grade=grade, created=False, run_id=draft.run_id, confidence=draft.confidence)
