"""The grading page's named reads: each one prebuilt Core statement, answering a typed record.

Every grading page and every save-and-next reads these (webapp.grading.item), so they use Core
statements (tables from webapp.core.db.table_of) and build small frozen records or detached table
models, not ORM loads: nothing enters the session, and no read keeps a lock on SQLite (each result
is fetched whole).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.auth.models import User
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.grading.evidence import Citations
from webapp.grading.grades import ADJUDICATIONS, CHANGES, lock_reason
from webapp.grading.models import GradeChange, ReferenceVersion
from webapp.grading.queue_statements import CASES, DRAFTS, GRADES, SLOTS
from webapp.runs.models import Run

_RUNS = table_of(Run)
_REFERENCES = table_of(ReferenceVersion)
_USERS = table_of(User)
_DRAFT = bindparam("draft_id")


@dataclass(frozen=True)
class ItemDraft:
    """The draft being graded."""

    id: int
    run_id: int
    case_pk: int
    draft_text: str | None
    citations: Citations
    confidence: float | None


@dataclass(frozen=True)
class ItemCase:
    """The test case the draft answers: the ticket, its conversation and account, the dataset's reference."""

    id: int
    case_id: str
    category: str | None
    golden: bool
    input: str
    conversation: list[object] | None  # JSON column: messages (objects) or plain strings
    account: dict[str, object] | None  # JSON column: the customer's account fields
    reference: str | None


@dataclass(frozen=True)
class RunRef:
    """The run the draft belongs to, as the breadcrumbs name it."""

    id: int
    name: str


@dataclass(frozen=True)
class ItemHead:
    """What the draft's own row tells: the draft, its case and its run."""

    draft: ItemDraft
    case: ItemCase
    run: RunRef


_ITEM = (
    core_select(
        DRAFTS.c.id,
        DRAFTS.c.run_id,
        DRAFTS.c.case_pk,
        DRAFTS.c.draft_text,
        DRAFTS.c.citations,
        DRAFTS.c.confidence,
        CASES.c.case_id,
        CASES.c.category,
        CASES.c.golden,
        CASES.c.input,
        CASES.c.conversation,
        CASES.c.account,
        CASES.c.reference,
        _RUNS.c.name.label("run_name"),
    )
    .join(CASES, CASES.c.id == DRAFTS.c.case_pk)
    .join(_RUNS, _RUNS.c.id == DRAFTS.c.run_id)
    .where(DRAFTS.c.id == _DRAFT)
)


def item_head(*, session: Session, draft_id: int) -> ItemHead | None:
    """Return the draft with its case and run, in one read (None when the draft does not exist)."""
    row = session.connection().execute(_ITEM, {"draft_id": draft_id}).first()
    if row is None:
        return None
    draft = ItemDraft(
        id=row.id,
        run_id=row.run_id,
        case_pk=row.case_pk,
        draft_text=row.draft_text,
        citations=row.citations or [],
        confidence=row.confidence,
    )
    case = ItemCase(
        id=row.case_pk,
        case_id=row.case_id,
        category=row.category,
        golden=row.golden,
        input=row.input,
        conversation=row.conversation,
        account=row.account,
        reference=row.reference,
    )
    return ItemHead(draft=draft, case=case, run=RunRef(id=row.run_id, name=row.run_name))


@dataclass(frozen=True)
class Place:
    """One of the draft's grading places: a grader's live or expired reservation, or their grade."""

    grader_id: int
    grade_id: int | None
    expires_at: dt.datetime | None


_PLACES = core_select(SLOTS.c.grader_id, SLOTS.c.grade_id, SLOTS.c.expires_at).where(SLOTS.c.draft_id == _DRAFT)


def places_of(*, session: Session, draft_id: int) -> list[Place]:
    """Return the draft's places (reservations and grades)."""
    rows = session.connection().execute(_PLACES, {"draft_id": draft_id})
    return [Place(grader_id=r.grader_id, grade_id=r.grade_id, expires_at=r.expires_at) for r in rows]


@dataclass(frozen=True)
class ShownReference:
    """The case's reference response as the grading page shows it, with its author's display name."""

    version: int
    text: str
    author_id: int
    author_name: str | None
    approved_at: dt.datetime | None


# The latest approved version of the case's reference, else its latest version.
_REFERENCE = (
    core_select(
        _REFERENCES.c.version,
        _REFERENCES.c.text,
        _REFERENCES.c.author_id,
        # its author's display name comes along: most grading pages name nobody else
        core_select(func.coalesce(func.nullif(_USERS.c.name, ""), _USERS.c.email))  # as user_names
        .where(_USERS.c.id == _REFERENCES.c.author_id)
        .scalar_subquery()
        .label("author_name"),
        _REFERENCES.c.approved_at,
    )
    .where(_REFERENCES.c.case_pk == bindparam("case_pk"))
    .order_by(_REFERENCES.c.approved_at.is_(None), _REFERENCES.c.version.desc())
    .limit(1)
)


def shown_reference(*, session: Session, case_pk: int) -> ShownReference | None:
    """Return the case's reference response: its latest approved version, else its latest (None: no version yet)."""
    row = session.connection().execute(_REFERENCE, {"case_pk": case_pk}).first()
    return ShownReference(*row) if row is not None else None


_HISTORY_ALL = (
    core_select(CHANGES)
    .join(GRADES, GRADES.c.id == CHANGES.c.grade_id)
    .where(GRADES.c.draft_id == _DRAFT)
    .order_by(CHANGES.c.changed_at, CHANGES.c.id)
)
_HISTORY_OWN = _HISTORY_ALL.where(GRADES.c.grader_id == bindparam("grader_id"))


def history_of(*, session: Session, draft_id: int, grader_id: int | None = None) -> list[GradeChange]:
    """Return the history of the draft's grades, oldest first: all of it, or only `grader_id`'s grade's."""
    if grader_id is None:
        result = session.connection().execute(_HISTORY_ALL, {"draft_id": draft_id})
    else:
        result = session.connection().execute(_HISTORY_OWN, {"draft_id": draft_id, "grader_id": grader_id})
    return [GradeChange(**row) for row in result.mappings()]


_OTHER = GRADES.alias("other")
# "Previous": the grader's last grade (not of this draft), how many grades its draft has, and its adjudication.
_PREVIOUS = (
    core_select(
        GRADES.c.draft_id,
        GRADES.c.status,
        core_select(func.count()).where(_OTHER.c.draft_id == GRADES.c.draft_id).scalar_subquery().label("n"),
        core_select(ADJUDICATIONS.c.status)
        .where(ADJUDICATIONS.c.draft_id == GRADES.c.draft_id)
        .scalar_subquery()
        .label("adjudication"),
    )
    .where(GRADES.c.grader_id == bindparam("grader_id"), GRADES.c.draft_id != _DRAFT)
    .order_by(GRADES.c.created_at.desc(), GRADES.c.id.desc())
    .limit(1)
)


def previous_draft(*, session: Session, spec: EvalSpec, grader_id: int, exclude_draft: int) -> int | None:
    """Return the draft of the grader's last grade while it may still be revised (its draft waits for other grades).

    Only the most recent grade counts ("Previous" is an undo, not a history browser); once the
    draft has all its grades it is evaluated (agreed, or locked in adjudication) and is no longer offered.
    """
    row = session.connection().execute(_PREVIOUS, {"grader_id": grader_id, "draft_id": exclude_draft}).first()
    if row is None or row.status != "submitted":
        return None
    if int(row.n) >= spec.grading.graders_per_draft:
        return None
    reason = lock_reason(draft_id=row.draft_id, adjudication_status=row.adjudication, grade_status=row.status)
    return int(row.draft_id) if reason is None else None


_NAMES = core_select(_USERS.c.id, _USERS.c.name, _USERS.c.email).where(
    _USERS.c.id.in_(bindparam("ids", expanding=True))
)


def user_names(*, session: Session, user_ids: set[int]) -> dict[int, str]:
    """Return the display names (name, else email) of the users (no read for none)."""
    if not user_ids:
        return {}
    rows = session.connection().execute(_NAMES, {"ids": sorted(user_ids)})
    return {int(u.id): (u.name or u.email) for u in rows}
