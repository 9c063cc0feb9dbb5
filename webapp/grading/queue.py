"""Grading batches, reservations (places) and each grader's next item, and skips.

The statements every grading page and save-and-next run (counts, held drafts, candidates) live in
webapp/grading/queue_statements.py; this module runs them and holds the reservations' writes.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal
from urllib.parse import urlencode

from sqlalchemy import Table, bindparam, delete, func, update
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select as OrmSelect

from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.models import GradingPlan, GradingSlot
from webapp.grading.queue_statements import (
    DRAFTS,
    GRADES,
    SLOTS,
    S,
    candidates_stmt,
    counts_stmt,
    held_stmt,
    run_planned,
)
from webapp.runs.models import Draft


@dataclass(frozen=True)
class BatchFilter:
    """A grading batch: a run, optionally narrowed by category, the case's intent, the draft's intent or golden cases.

    `intent` is the case's intent (the dataset's label), as everywhere in the product; `draft_intent`
    is the intent the assistant predicted for the draft.
    """

    run_id: int
    category: str | None = None
    intent: str | None = None
    golden: bool | None = None
    draft_intent: str | None = None

    def query_string(self) -> str:
        """Return the filter as a URL query string (without the run), every value percent-encoded.

        An intent or category may hold `&`, `#`, `+` or `%` (they are free text in the dataset):
        joined raw, such a value broke save-and-next's link back to the filtered batch.
        """
        pairs: list[tuple[str, str]] = []
        if self.category:
            pairs.append(("category", self.category))
        if self.intent:
            pairs.append(("intent", self.intent))
        if self.draft_intent:
            pairs.append(("draft_intent", self.draft_intent))
        if self.golden is not None:
            pairs.append(("golden", "1" if self.golden else "0"))
        return urlencode(pairs)

    @property
    def shape(self) -> tuple[bool, bool, bool, bool | None]:
        """Return which filters are set (the key of the prebuilt statements)."""
        return (bool(self.category), bool(self.intent), bool(self.draft_intent), self.golden)

    def params(self) -> dict[str, int | str | None]:
        """Return the bind parameters of the prebuilt statements."""
        return {
            "run_id": self.run_id,
            "category": self.category,
            "intent": self.intent,
            "draft_intent": self.draft_intent,
        }


_DRAFT_BASICS = core_select(DRAFTS.c.run_id, DRAFTS.c.confidence).where(DRAFTS.c.id == bindparam("draft_id"))


def draft_basics(*, session: Session, draft_id: int) -> tuple[int, float | None] | None:
    """Return the draft's run and confidence (None when the draft does not exist), without loading the draft."""
    row = session.connection().execute(_DRAFT_BASICS, {"draft_id": draft_id}).first()
    return (int(row.run_id), row.confidence) if row is not None else None


def gradable(stmt: S) -> S:
    """Keep only drafts with something to grade (escalations and fallbacks carry no draft text), and
    in a run with a grading plan (a PPI sample) only the drafts the sample drew and not closed (grade until decided)."""
    in_plan = (
        core_select(col(GradingPlan.draft_id))
        .where(col(GradingPlan.draft_id) == Draft.id, col(GradingPlan.closed_reason).is_(None))
        .exists()
    )
    planned_run = core_select(col(GradingPlan.draft_id)).where(col(GradingPlan.run_id) == Draft.run_id).exists()
    return stmt.where(col(Draft.draft_text).is_not(None), col(Draft.escalated).is_(False), in_plan | ~planned_run)


# Whether one draft is gradable, by `gradable` itself (the queue's rule): what a save checks first.
IS_GRADABLE = gradable(select(Draft.id).where(col(Draft.id) == bindparam("draft_id"))).exists()


def batch_where(stmt: S, batch: BatchFilter, *, join_case: bool = True) -> S:
    """Narrow an ORM select of drafts to the batch's gradable drafts (joining the case when needed)."""
    if join_case or batch.category or batch.intent or batch.golden is not None:
        stmt = stmt.join(EvalCase, col(EvalCase.id) == Draft.case_pk)
    stmt = gradable(stmt.where(col(Draft.run_id) == batch.run_id))
    if batch.category:
        stmt = stmt.where(col(EvalCase.category) == batch.category)
    if batch.intent:
        stmt = stmt.where(col(EvalCase.intent) == batch.intent)
    if batch.draft_intent:
        stmt = stmt.where(col(Draft.intent) == batch.draft_intent)
    if batch.golden is not None:
        stmt = stmt.where(col(EvalCase.golden).is_(batch.golden))
    return stmt


def batch_drafts_stmt(batch: BatchFilter) -> OrmSelect[Draft, EvalCase]:
    """Return a select of (Draft, EvalCase) in the batch, oldest first (case position, sample, id)."""
    stmt = batch_where(select(Draft, EvalCase), batch)
    rank = core_select(col(GradingPlan.rank)).where(col(GradingPlan.draft_id) == Draft.id).scalar_subquery()
    return stmt.order_by(func.coalesce(rank, col(EvalCase.position)), col(Draft.sample_index), col(Draft.id))


@dataclass(frozen=True)
class BatchCounts:
    """The grading page's progress: drafts in the batch, grades in against needed, and mine."""

    drafts: int
    grades_done: int
    grades_needed: int
    mine: int

    @property
    def share(self) -> float:
        """Return the share of needed grades that are in."""
        return self.grades_done / self.grades_needed if self.grades_needed else 0.0

    @property
    def mine_share(self) -> float:
        """Return the share of the batch's drafts the grader has graded."""
        return self.mine / self.drafts if self.drafts else 0.0


def batch_counts(*, session: Session, spec: EvalSpec, batch: BatchFilter, grader_id: int = 0) -> BatchCounts:
    """Return the batch's progress in one aggregate query: the grading page on every item, the batch page too.

    `mine` counts the grades of `grader_id` (0: nobody).
    """
    n = spec.grading.graders_per_draft
    params = {**batch.params(), "grader_id": grader_id, "n": n}
    stmt = counts_stmt(batch.shape, run_planned(session, batch.run_id))
    drafts, done, mine = session.connection().execute(stmt, params).one()
    return BatchCounts(
        drafts=int(drafts), grades_done=int(done), grades_needed=int(drafts) * n, mine=int(mine)
    )


@lru_cache(maxsize=8)
def _insert_ignore_stmt(dialect: str, table_name: str) -> Executable:
    table = {t.name: t for t in (SLOTS, GRADES)}[table_name]
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    # RETURNING tells apart "inserted" and "did nothing" on both drivers (rowcount is not reliable with it).
    return insert(table).on_conflict_do_nothing().returning(table.c.id)


def insert_ignore(session: Session, table: Table, values: Mapping[str, object]) -> int | None:
    """INSERT ... ON CONFLICT DO NOTHING into grading_slot or grade; the new row's id, or None when it did nothing."""
    stmt = _insert_ignore_stmt(session.get_bind().dialect.name, table.name)
    return session.connection().execute(stmt, values).scalar()


_RELEASE_EXPIRED = delete(SLOTS).where(SLOTS.c.grade_id.is_(None), SLOTS.c.expires_at < bindparam("now"))


def release_expired(*, session: Session, now: dt.datetime | None = None) -> int:
    """Delete reservations whose time is up; return how many were released."""
    result = session.connection().execute(_RELEASE_EXPIRED, {"now": now or utcnow()})
    return result.rowcount


def claim_slot(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    grader_id: int,
    now: dt.datetime | None = None,
    release: bool = True,
) -> GradingSlot | None:
    """Reserve one of the draft's places for the grader (or refresh theirs); None when none is free.

    release=False when the caller has just released expired reservations itself.
    """
    now = now or utcnow()
    expires = now + dt.timedelta(minutes=spec.grading.reservation_minutes)
    conn = session.connection()
    if release:
        release_expired(session=session, now=now)
    mine = session.exec(
        select(GradingSlot)
        .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).first()
    if mine is not None:
        if mine.grade_id is None:
            conn.execute(update(GradingSlot).where(col(GradingSlot.id) == mine.id).values(expires_at=expires))
            session.refresh(mine)
        return mine
    for slot in range(spec.grading.graders_per_draft):
        # The unique (draft_id, slot) and (draft_id, grader_id) constraints decide races: a losing
        # insert does nothing, on SQLite and PostgreSQL alike, and we try the next place.
        values = {
            "draft_id": draft_id,
            "slot": slot,
            "grader_id": grader_id,
            "reserved_at": now,
            "expires_at": expires,
        }
        if insert_ignore(session, SLOTS, values) is not None:
            break
    return session.exec(
        select(GradingSlot)
        .where(GradingSlot.draft_id == draft_id, GradingSlot.grader_id == grader_id)
        .execution_options(populate_existing=True)
    ).first()


_RELEASE_MINE = delete(SLOTS).where(
    SLOTS.c.draft_id == bindparam("draft_id"),
    SLOTS.c.grader_id == bindparam("grader_id"),
    SLOTS.c.grade_id.is_(None),
)


def release_reservation(*, session: Session, draft_id: int, grader_id: int) -> None:
    """Give back the grader's reservation of a draft (a skip)."""
    session.connection().execute(_RELEASE_MINE, {"draft_id": draft_id, "grader_id": grader_id})


def next_item(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    exclude: Collection[int] = (),
    now: dt.datetime | None = None,
) -> Draft | None:
    """Reserve and return the oldest draft of the batch the grader has not graded that still needs grades.

    A draft the grader already holds comes first; drafts in `exclude` (the one on screen) are passed
    over; drafts the grader skipped come only when nothing else is left.
    """
    draft_id = reserve_next(
        session=session, spec=spec, grader_id=grader_id, batch=batch, exclude=exclude, now=now
    )
    return session.get(Draft, draft_id) if draft_id is not None else None


_EXTEND = (
    update(SLOTS)
    .where(SLOTS.c.draft_id == bindparam("d"), SLOTS.c.grader_id == bindparam("g"))
    .values(expires_at=bindparam("expires"))
)


def needs_extension(*, spec: EvalSpec, expires: dt.datetime | None, now: dt.datetime) -> bool:
    """Tell whether a held reservation should be extended: less than half its window is left.

    Extending only then means re-reading a page that holds its next item writes nothing.
    """
    window = dt.timedelta(minutes=spec.grading.reservation_minutes)
    return expires is None or as_utc(expires) < now + window / 2


def held_next(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    exclude: Collection[int] = (),
) -> tuple[int, dt.datetime | None] | None:
    """Return the first draft of the batch the grader holds unsaved (not in `exclude`) with its expiry."""
    held = held_drafts(session=session, spec=spec, grader_id=grader_id, batch=batch, exclude=exclude)
    return held[0] if held else None


Held = tuple[int, dt.datetime | None]


class _NotRead(enum.Enum):
    """A `held` argument the caller has not read (reserve_next reads it)."""

    TOKEN = 0


NOT_READ: Literal[_NotRead.TOKEN] = _NotRead.TOKEN


def held_drafts(
    *, session: Session, spec: EvalSpec, grader_id: int, batch: BatchFilter, exclude: Collection[int] = ()
) -> list[Held]:
    """Return the first two drafts of the batch the grader holds unsaved (not in `exclude`), in queue order."""
    # An empty expanding IN would be "NOT IN ()", which both databases read as true.
    params = {**batch.params(), "grader_id": grader_id, "exclude": list(exclude) or [-1]}
    stmt = held_stmt(batch.shape, run_planned(session, batch.run_id))
    rows = session.connection().execute(stmt, params).all()
    return [(int(row.id), row.expires_at) for row in rows]


def reserve_next(
    *,
    session: Session,
    spec: EvalSpec,
    grader_id: int,
    batch: BatchFilter,
    exclude: Collection[int] = (),
    now: dt.datetime | None = None,
    held: Held | None | _NotRead = NOT_READ,
) -> int | None:
    """Do what next_item does and return only the draft's id (the grading page pre-reserves with it).

    `held` is held_next(exclude=exclude) when the caller has read it already (None: nothing held).
    """
    now = now or utcnow()
    window = dt.timedelta(minutes=spec.grading.reservation_minutes)
    if isinstance(held, _NotRead):
        held = held_next(session=session, spec=spec, grader_id=grader_id, batch=batch, exclude=exclude)
    conn = session.connection()
    if held is not None:
        draft_id, expires = held
        if needs_extension(spec=spec, expires=expires, now=now):  # still mine
            conn.execute(_EXTEND, {"d": draft_id, "g": grader_id, "expires": now + window})
        return draft_id
    release_expired(session=session, now=now)
    params = {
        **batch.params(),
        "grader_id": grader_id,
        "n": spec.grading.graders_per_draft,
        "exclude": list(exclude) or [-1],
    }
    planned = run_planned(session, batch.run_id)
    # Skipped drafts go to the end of this grader's queue: offered again only when nothing else is left.
    for skipped in (False, True):
        for (draft_id,) in conn.execute(candidates_stmt(batch.shape, skipped, planned), params).all():
            # The candidate query left out drafts where this grader has a place, so only free places
            # are tried; the unique constraints decide a race (see claim_slot).
            for slot in range(spec.grading.graders_per_draft):
                values = {
                    "draft_id": draft_id,
                    "slot": slot,
                    "grader_id": grader_id,
                    "reserved_at": now,
                    "expires_at": now + window,
                }
                if insert_ignore(session, SLOTS, values) is not None:
                    return int(draft_id)
    return None
