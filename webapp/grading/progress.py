"""Progress of a batch, what waits for a grader, and each grader's pace today."""

from __future__ import annotations

import datetime as dt
import statistics
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from webapp.auth.models import User
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
    GradingSlot,
)
from webapp.grading.queue import BatchFilter, batch_counts, batch_where, gradable
from webapp.runs.models import Draft

MIN_TIMED_SECONDS = 1.0  # a grade written faster than this was not timed by a person (see grading_pace)


@dataclass(frozen=True)
class Pace:
    """A grader's day: first grades submitted today and the median seconds spent per grade."""

    grader_id: int
    name: str
    grades_today: int
    median_seconds: float | None


def grading_pace(
    *, session: Session, grader_ids: Collection[int] | None = None, now: dt.datetime | None = None
) -> list[Pace]:
    """Return today's (UTC) grades and median seconds per grade, per grader who graded today.

    A grade's time runs from when the grader could start it, the later of its reservation and the
    grader's previous grade, to its submission; revisions are not counted. Times under
    MIN_TIMED_SECONDS are left out of the median (the grade still counts for the day): nobody reads
    and grades a draft in under a second, so such grades were written by a script (demo seeding, an
    import, a bulk API call), and a "median 0 s per grade" would describe the script, not the grader.
    With no timed grade the median is None and the page shows none.
    """
    now = now or utcnow()
    midnight = dt.datetime.combine(now.date(), dt.time(), tzinfo=dt.UTC)
    stmt = (
        select(Grade.grader_id, Grade.created_at, GradingSlot.reserved_at)
        .join(GradingSlot, col(GradingSlot.grade_id) == Grade.id, isouter=True)
        .where(col(Grade.created_at) >= midnight)
        .order_by(col(Grade.grader_id), col(Grade.created_at), col(Grade.id))
    )
    if grader_ids is not None:
        if not grader_ids:
            return []
        stmt = stmt.where(col(Grade.grader_id).in_(list(grader_ids)))
    durations: dict[int, list[float]] = defaultdict(list)
    previous: dict[int, dt.datetime] = {}
    for grader_id, created, reserved in session.exec(stmt):
        created = as_utc(created)
        starts = [as_utc(t) for t in (reserved, previous.get(grader_id)) if t is not None]
        durations[grader_id].append(
            max(0.0, (created - max(starts)).total_seconds()) if starts else float("nan")
        )
        previous[grader_id] = created
    if not durations:
        return []
    names = {
        u.id: (u.name or u.email) for u in session.exec(select(User).where(col(User.id).in_(list(durations))))
    }
    out = []
    for grader_id, values in durations.items():
        # NaN: no reservation and no earlier grade to start from; under a second: not a human's time
        known = [v for v in values if v == v and v >= MIN_TIMED_SECONDS]
        out.append(
            Pace(
                grader_id=grader_id,
                name=names.get(grader_id, "?"),
                grades_today=len(values),
                median_seconds=statistics.median(known) if known else None,
            )
        )
    return sorted(out, key=lambda p: p.name.lower())


@dataclass
class GraderProgress:
    grader_id: int
    name: str
    graded: int
    reserved: int


@dataclass
class BatchProgress:
    """Progress of a batch: grades in against grades needed, per grader, and draft outcomes."""

    drafts: int
    grades_needed: int
    grades_done: int
    final: int
    in_adjudication: int
    graders: list[GraderProgress]

    @property
    def share(self) -> float:
        """Return the share of needed grades that are in."""
        return self.grades_done / self.grades_needed if self.grades_needed else 0.0


def batch_progress(
    *, session: Session, spec: EvalSpec, batch: BatchFilter, now: dt.datetime | None = None
) -> BatchProgress:
    """Return how far grading of a batch has come, overall and per grader."""
    now = now or utcnow()
    counts = batch_counts(session=session, spec=spec, batch=batch)  # the grading page's figures
    # the batch's draft ids as a subquery: counted in SQL, per grader, without loading a row per
    # draft or grade (a 1,540-draft run: ~100 ms of ORM rows and IN-list parameters before)
    ids = batch_where(select(Draft.id), batch, join_case=False).scalar_subquery()
    graded = session.exec(
        select(Grade.grader_id, func.count()).where(col(Grade.draft_id).in_(ids)).group_by(col(Grade.grader_id))
    ).all()
    reserved = session.exec(
        select(GradingSlot.grader_id, func.count())
        .where(col(GradingSlot.draft_id).in_(ids), col(GradingSlot.grade_id).is_(None), col(GradingSlot.expires_at) > now)
        .group_by(col(GradingSlot.grader_id))
    ).all()
    finals = session.exec(select(func.count()).where(col(FinalGrade.draft_id).in_(ids))).one()
    adj = session.exec(
        select(func.count(func.distinct(Adjudication.draft_id))).where(
            col(Adjudication.draft_id).in_(ids), col(Adjudication.status).in_(("open", "rework"))
        )
    ).one()
    by_grader: dict[int, GraderProgress] = {}
    grader_ids = {int(g) for g, _ in graded} | {int(g) for g, _ in reserved}
    names = (
        {u.id: (u.name or u.email) for u in session.exec(select(User).where(col(User.id).in_(sorted(grader_ids))))}
        if grader_ids
        else {}
    )
    for grader_id, n in graded:
        by_grader[grader_id] = GraderProgress(grader_id, names.get(grader_id, "?"), int(n), 0)
    for grader_id, n in reserved:
        p = by_grader.setdefault(grader_id, GraderProgress(grader_id, names.get(grader_id, "?"), 0, 0))
        p.reserved = int(n)
    return BatchProgress(
        drafts=counts.drafts,
        grades_needed=counts.grades_needed,
        grades_done=counts.grades_done,
        final=int(finals),
        in_adjudication=int(adj),
        graders=sorted(by_grader.values(), key=lambda p: p.name.lower()),
    )


def waiting_for_grader(
    *, session: Session, spec: EvalSpec, grader_id: int, now: dt.datetime | None = None
) -> int:
    """Count drafts (all runs) the grader has not graded that still have a free place."""
    now = now or utcnow()
    full = (
        select(GradingSlot.draft_id)
        .where(or_(col(GradingSlot.grade_id).is_not(None), col(GradingSlot.expires_at) > now))
        .group_by(col(GradingSlot.draft_id))
        .having(func.count() >= spec.grading.graders_per_draft)
    )
    graded = select(Grade.draft_id).where(Grade.grader_id == grader_id)
    stmt = gradable(select(func.count()).select_from(Draft)).where(
        col(Draft.id).not_in(full), col(Draft.id).not_in(graded)
    )
    return int(session.exec(stmt).one())
