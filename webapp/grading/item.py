"""The grading page's item: a draft with its case, KB, reference, the grades the caller may see, and the queue around it.

Every grading page and every save-and-next builds this, so it reads with prebuilt Core
statements (tables from webapp.core.db.table_of) and returns rows, not ORM objects; it writes only to reserve
the grader's next draft, in a short committed write section (webapp.grading.writes).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, func
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.auth.models import User
from webapp.auth.service import Principal
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.grading.evidence import (
    JudgeLookup,
    kb_read,
    kb_texts_from,
    model_signals,
    signals_from,
    signals_reads,
)
from webapp.grading.grades import ADJUDICATIONS, CHANGES, lock_reason, sees_all_grades
from webapp.grading.models import ReferenceVersion
from webapp.grading.outcome import ADJUDICATION_OF, FINAL_OF, GRADES_OF
from webapp.grading.queue import (
    CASES,
    DRAFTS,
    GRADES,
    SLOTS,
    BatchFilter,
    Held,
    counts_from,
    counts_read,
    held_from,
    held_read,
    needs_extension,
    reserve_next,
)
from webapp.grading.reads import Item, run_all
from webapp.grading.scores import scores_of
from webapp.grading.writes import write_section
from webapp.runs.models import Run

_RUNS = table_of(Run)
_REFERENCES = table_of(ReferenceVersion)
_USERS = table_of(User)

_DRAFT = bindparam("draft_id")
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
_SLOTS_OF = core_select(SLOTS.c.grader_id, SLOTS.c.grade_id, SLOTS.c.expires_at).where(
    SLOTS.c.draft_id == _DRAFT
)
_HISTORY_ALL = (
    core_select(CHANGES)
    .join(GRADES, GRADES.c.id == CHANGES.c.grade_id)
    .where(GRADES.c.draft_id == _DRAFT)
    .order_by(CHANGES.c.changed_at, CHANGES.c.id)
)
_HISTORY_OWN = _HISTORY_ALL.where(GRADES.c.grader_id == bindparam("grader_id"))
# The latest approved version of the case's reference, else its latest version.
_REFERENCE = (
    core_select(
        _REFERENCES,
        # its author's display name comes along: most grading pages name nobody else
        core_select(func.coalesce(func.nullif(_USERS.c.name, ""), _USERS.c.email))  # as user_names
        .where(_USERS.c.id == _REFERENCES.c.author_id)
        .scalar_subquery()
        .label("author_name"),
    )
    .where(_REFERENCES.c.case_pk == bindparam("case_pk"))
    .order_by(_REFERENCES.c.approved_at.is_(None), _REFERENCES.c.version.desc())
    .limit(1)
)
_OTHER = GRADES.alias("other")
# "Previous": the grader's last grade (not of this draft), how many grades its draft has, and its adjudication.
_PREVIOUS = (
    core_select(
        GRADES.c.draft_id,
        GRADES.c.status,
        core_select(func.count()).where(_OTHER.c.draft_id == GRADES.c.draft_id).scalar_subquery(),
        core_select(ADJUDICATIONS.c.status)
        .where(ADJUDICATIONS.c.draft_id == GRADES.c.draft_id)
        .scalar_subquery(),
    )
    .where(GRADES.c.grader_id == bindparam("grader_id"), GRADES.c.draft_id != _DRAFT)
    .order_by(GRADES.c.created_at.desc(), GRADES.c.id.desc())
    .limit(1)
)
_NAMES = core_select(_USERS.c.id, _USERS.c.name, _USERS.c.email).where(
    _USERS.c.id.in_(bindparam("ids", expanding=True))
)


def previous_draft(*, session: Session, spec: EvalSpec, grader_id: int, exclude_draft: int) -> int | None:
    """Return the draft of the grader's last grade while it may still be revised (its draft waits for other grades).

    Only the most recent grade counts ("Previous" is an undo, not a history browser); once the
    draft has all its grades it is evaluated (agreed, or locked in adjudication) and is no longer offered.
    """
    (result,) = run_all(session, previous_read(grader_id=grader_id, exclude_draft=exclude_draft))
    return previous_from(spec=spec, row=result.first())


def previous_read(*, grader_id: int, exclude_draft: int) -> Item:
    """previous_draft's statement, to run with others (webapp.grading.reads)."""
    return (_PREVIOUS, {"grader_id": grader_id, "draft_id": exclude_draft})


def previous_from(*, spec: EvalSpec, row: Any) -> int | None:
    """Return previous_draft's answer from the row of previous_read's statement."""
    if row is None or row.status != "submitted":
        return None
    draft_id, status, n, adjudication = tuple(row)
    if int(n) >= spec.grading.graders_per_draft:
        return None
    if lock_reason(draft_id=draft_id, adjudication_status=adjudication, grade_status=status) is not None:
        return None
    return int(draft_id)


def user_names(*, session: Session, user_ids: set[int]) -> dict[int, str]:
    """Return the display names (name, else email) of the users."""
    if not user_ids:
        return {}
    rows = session.connection().execute(_NAMES, {"ids": sorted(user_ids)})
    return {int(u.id): (u.name or u.email) for u in rows}


def reserve_upcoming(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    draft_id: int,
    held: Held | None,
) -> int | None:
    """Return the grader's next draft after this one, reserving it now (in a short write section) unless already held.

    `held` is held_next(exclude=(draft_id,)), read by the caller with its other reads.
    """
    now = utcnow()
    if held is not None and not needs_extension(spec=spec, expires=held[1], now=now):
        return held[0]
    with write_section(session):
        return reserve_next(
            session=session,
            spec=spec,
            grader_id=grader_id,
            batch=batch,
            exclude=(draft_id,),
            now=now,
            held=held,  # extended there when it is one
        )


def grading_item(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    principal: Principal,
    filters: BatchFilter,
    judge: JudgeLookup | None = None,
    saved: tuple[int, float | None] | None = None,
) -> dict[str, Any] | None:
    """Return what the grading page shows for a draft (None when it does not exist).

    `filters` narrow the grader's batch; its run is the draft's, whatever `filters.run_id` says.

    Blind grading holds: other grades, the outcome and others' history only once the caller has
    graded the draft (the lead always); the model's signals only after grading, unless the spec says.
    The grader's next draft is reserved now, while they read this one, so save-and-next only saves
    and swaps; only in a grading flow (this draft is reserved for or graded by the caller): merely
    looking at a draft takes no place from anyone.

    `saved` (draft id, confidence) is the draft a save-and-next just graded: its model signals come too.
    """
    me = principal.user_id
    # The reads come in two lists: what the draft id alone tells, then what the draft's row tells
    # (its run, case and citations). A save's signals of the draft just graded join the first.
    saved_reads = (
        signals_reads(spec=spec, draft_id=saved[0], has_graded=True, judge=judge)
        if saved is not None
        else None
    ) or []
    first = run_all(
        session,
        (_ITEM, {"draft_id": draft_id}),
        (GRADES_OF, {"draft_id": draft_id}),
        (_SLOTS_OF, {"draft_id": draft_id}),
        previous_read(grader_id=me, exclude_draft=draft_id),
        *saved_reads,
    )
    row: Any = first[0].first()
    if row is None:
        return None
    batch = replace(filters, run_id=row.run_id)
    draft = SimpleNamespace(
        id=row.id,
        run_id=row.run_id,
        case_pk=row.case_pk,
        draft_text=row.draft_text,
        citations=row.citations or [],
        confidence=row.confidence,
    )
    case = SimpleNamespace(
        id=row.case_pk,
        case_id=row.case_id,
        category=row.category,
        golden=row.golden,
        input=row.input,
        conversation=row.conversation,
        account=row.account,
        reference=row.reference,
    )
    grades: list[Any] = list(first[1].all())
    own = next((g for g in grades if g.grader_id == me), None)
    see_all = sees_all_grades(principal=principal, has_own_grade=own is not None)
    others = [g for g in grades if g.grader_id != me] if see_all else []
    now = utcnow()
    slots: list[Any] = list(first[2].all())
    slot = next((x for x in slots if x.grader_id == me), None)
    live = [
        x
        for x in slots
        if x.grade_id is not None or (x.expires_at is not None and as_utc(x.expires_at) > now)
    ]
    has_place = own is not None or slot is not None or len(live) < spec.grading.graders_per_draft
    second: list[Item] = [
        counts_read(session=session, spec=spec, batch=batch, grader_id=me),
        (_REFERENCE, {"case_pk": draft.case_pk}),
    ]
    kb = kb_read(draft.citations)
    if kb is not None:
        second.append(kb)
    if slot is not None:
        second.append(held_read(session=session, spec=spec, grader_id=me, batch=batch, exclude=(draft_id,)))
    if grades:  # a draft nobody graded has no outcome and no history
        second.append((ADJUDICATION_OF, {"draft_id": draft_id}))
        if see_all:
            second += [(FINAL_OF, {"draft_id": draft_id}), (_HISTORY_ALL, {"draft_id": draft_id})]
        elif own is not None:
            second.append((_HISTORY_OWN, {"draft_id": draft_id, "grader_id": me}))
    results = iter(run_all(session, *second))
    counts = counts_from(spec=spec, row=next(results).one())
    reference: Any = next(results).first()
    cited = kb_texts_from(draft.citations, next(results) if kb is not None else ())
    held = held_from(next(results).first()) if slot is not None else None
    adjudication: Any = next(results).first() if grades else None
    final: Any = next(results).first() if grades and see_all else None
    history: list[Any] = list(next(results).all()) if grades and (see_all or own is not None) else []
    status = adjudication.status if adjudication is not None else None
    # Why the caller may not change a grade now (resolved, or a disagreement the lead holds: the lock rule).
    locked: str | None = None
    if own is not None:
        locked = lock_reason(draft_id=draft_id, adjudication_status=status, grade_status=own.status)
    elif status == "resolved":
        locked = "this draft has been adjudicated; grades can no longer change"
    upcoming = None
    if slot is not None:
        upcoming = reserve_upcoming(
            session=session, spec=spec, grader_id=me, batch=batch, draft_id=draft_id, held=held
        )
    # The names the page shows (own and visible grades, history, reference author, decider): the
    # caller's and the author's are known already, others are read.
    known = {me: principal.name or principal.email}
    if reference is not None:
        known[reference.author_id] = reference.author_name or "?"
    user_ids = {g.grader_id for g in others} | {h.changed_by for h in history}
    if final is not None and final.decided_by:
        user_ids.add(final.decided_by)
    users = {**known, **user_names(session=session, user_ids=user_ids - known.keys())}
    qs = batch.query_string()
    extra: dict[str, Any] = {}
    if saved is not None:
        extra = {
            "saved_draft_id": saved[0],
            "saved_signals": signals_from(first[4:], confidence=saved[1], judge=judge)
            if saved_reads
            else None,
        }
    return {
        "draft": draft,
        "case": case,
        "run": SimpleNamespace(id=row.run_id, name=row.run_name),
        "batch": batch,
        "batch_qs": qs,
        "cited": cited,
        "reference": reference,
        "own": own,
        "others": others,
        "show_others": see_all,
        # A lead who grades the draft too can keep it blind: others' grades start folded away.
        "others_folded": own is None,
        # Shown only once the caller has graded the draft (blind), so a new item reads nothing for them.
        "signals": model_signals(
            session=session,
            spec=spec,
            draft_id=draft_id,
            confidence=draft.confidence,
            has_graded=own is not None,
            judge=judge,
        ),
        "history": history,
        "adjudication": adjudication if see_all else None,
        "final": final,
        "locked": locked,
        "has_place": has_place,
        "reservation": slot if slot is not None and slot.grade_id is None else None,
        "counts": counts,
        "upcoming": upcoming,
        "previous": previous_from(spec=spec, row=first[3].first()),
        "users": users,
        "values": scores_of(own) if own is not None else {},
        "draft_url": f"/grading/drafts/{draft_id}" + (f"?{qs}" if qs else ""),
        **extra,
    }
