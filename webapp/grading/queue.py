"""Grading batches, reservations (places) and each grader's next item, and skips.

The statements every grading page and save-and-next run are built from the batch's shape (which
filters are set, and whether the run has a grading plan) with bind parameters, once per shape
(lru_cache: building them cost more than running them, 7 December), and executed as Core
statements (tables from webapp.core.db.table_of). They read a run's drafts in queue order through
indexes, so a save reads what it needs rather than every draft of the run (docs/benchmarks.md).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, TypeVar
from urllib.parse import urlencode

from sqlalchemy import ColumnElement, Select, Table, and_, bindparam, delete, func, update
from sqlalchemy import case as sql_case
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import Select as OrmSelect

from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.models import Grade, GradingPlan, GradingSkip, GradingSlot
from webapp.runs.models import Draft, Run

DRAFTS = table_of(Draft)
CASES = table_of(EvalCase)
SLOTS = table_of(GradingSlot)
GRADES = table_of(Grade)
SKIPS = table_of(GradingSkip)
PLAN = table_of(GradingPlan)
RUNS = table_of(Run)
# A select of drafts (ORM or Core) narrowed by the helpers below, which keep its columns.
S = TypeVar("S", bound=Select)  # a bare Select: any columns


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


Shape = tuple[bool, bool, bool, bool | None]

# Whether the run has a grading plan (a PPI sample): its queue is the plan's drafts in the plan's
# random order; else every gradable draft of the run in the dataset's order.
_RUN_PLANNED = core_select(PLAN.c.draft_id).where(PLAN.c.run_id == bindparam("run_id")).exists()
_RUN_HAS_PLAN = core_select(_RUN_PLANNED)
_RUN_DATASET = core_select(RUNS.c.dataset_id).where(RUNS.c.id == bindparam("run_id")).scalar_subquery()


def run_planned(session: Session, run_id: int) -> bool:
    """Tell whether the run has a grading plan (one lookup on grading_plan's run_id index).

    The statements below come in two kinds, chosen by this: each still checks it itself, so a plan
    drawn between this lookup and the statement serves nothing outside the plan (that one request
    finds nothing to serve, the next one takes the plan's queue).
    """
    return bool(session.connection().execute(_RUN_HAS_PLAN, {"run_id": run_id}).scalar())


def _in_batch(stmt: S, shape: Shape, *, planned: bool, join_case: bool = True, in_order: bool = True) -> S:
    """Narrow a Core select of drafts to the batch's gradable drafts, with bind parameters.

    In a planned run the drafts are reached through the plan (grading_plan's run_id index: only the
    sample's drafts are read); in a run without a plan, through the run's dataset's cases (the case
    index on (dataset_id, position) gives the queue order, so a LIMIT stops early). A run's drafts
    are drafts of its dataset's cases, on every path that writes them (imports, the evaluator,
    production weeks, the demo), so the dataset condition leaves none out. in_order=False leaves that
    condition out, for a statement that reaches its few drafts another way (held_stmt).
    """
    category, intent, draft_intent, golden = shape
    if planned:
        stmt = stmt.join(
            PLAN, and_(PLAN.c.draft_id == DRAFTS.c.id, PLAN.c.run_id == bindparam("run_id"), PLAN.c.closed_reason.is_(None))
        )
    with_case = (join_case and not planned) or bool(category or intent) or golden is not None
    if with_case:
        stmt = stmt.join(CASES, CASES.c.id == DRAFTS.c.case_pk)
    stmt = stmt.where(
        DRAFTS.c.run_id == bindparam("run_id"), DRAFTS.c.draft_text.is_not(None), DRAFTS.c.escalated.is_(False)
    )
    if not planned:
        stmt = stmt.where(~_RUN_PLANNED)
        if with_case and in_order:
            stmt = stmt.where(CASES.c.dataset_id == _RUN_DATASET)
    if category:
        stmt = stmt.where(CASES.c.category == bindparam("category"))
    if intent:
        stmt = stmt.where(CASES.c.intent == bindparam("intent"))
    if draft_intent:
        stmt = stmt.where(DRAFTS.c.intent == bindparam("draft_intent"))
    if golden is not None:
        stmt = stmt.where(CASES.c.golden.is_(golden))
    return stmt


def _queue_order(planned: bool) -> tuple[ColumnElement[object], ...]:
    """The queue order: the plan's random rank in a planned run, else the case's position in the
    dataset; then the sample and the draft id."""
    first: ColumnElement[object] = PLAN.c.rank if planned else CASES.c.position
    return (first, DRAFTS.c.sample_index, DRAFTS.c.id)


# The statements are built once per batch shape (48 at most) and kept: building one cost more
# than running it (SQLAlchemy's expression construction and cache key, ~35% of held_drafts), and a
# save-and-next runs four of them (profile of 7 December, docs/benchmarks.md).
@lru_cache(maxsize=64)
def counts_stmt(shape: Shape, planned: bool) -> Select[int, int, int]:
    """(drafts, grades in counted up to graders_per_draft each, the grader's grades) of the batch.

    The grades are read from the grade side, over the draft ids between the run's first and last
    (a range of grade's draft_id index: what the run's drafts have, not a probe per draft), each
    joined to its draft to keep the batch's; the drafts are counted on their own.
    """
    drafts = _in_batch(core_select(func.count()).select_from(DRAFTS), shape, planned=planned, join_case=False)
    first = core_select(func.min(DRAFTS.c.id)).where(DRAFTS.c.run_id == bindparam("run_id")).scalar_subquery()
    last = core_select(func.max(DRAFTS.c.id)).where(DRAFTS.c.run_id == bindparam("run_id")).scalar_subquery()
    per_draft = (
        _in_batch(
            core_select(
                GRADES.c.draft_id,
                func.count().label("c"),
                func.sum(sql_case((GRADES.c.grader_id == bindparam("grader_id"), 1), else_=0)).label("m"),
            ).select_from(GRADES.join(DRAFTS, DRAFTS.c.id == GRADES.c.draft_id)),
            shape,
            planned=planned,
            join_case=False,
        )
        .where(GRADES.c.draft_id.between(first, last))
        .group_by(GRADES.c.draft_id)
        .subquery()
    )
    n = bindparam("n")
    return core_select(
        drafts.scalar_subquery(),
        func.coalesce(func.sum(sql_case((per_draft.c.c > n, n), else_=per_draft.c.c)), 0),
        func.coalesce(func.sum(per_draft.c.m), 0),
    ).select_from(per_draft)


@lru_cache(maxsize=64)
def held_stmt(shape: Shape, planned: bool) -> Select[int, dt.datetime | None]:
    """The first two drafts of the batch the grader holds a reservation of (no grade yet), with their expiry.

    Two: a save-and-next moves on to the first and shows the second as the one after it. The
    grader's unsaved reservations (a handful, grading_slot's grader_id index) are read first and
    their drafts by primary key, whatever the planner's statistics say.
    """
    unsaved = core_select(SLOTS.c.draft_id).where(
        SLOTS.c.grader_id == bindparam("grader_id"), SLOTS.c.grade_id.is_(None)
    )
    expires = (
        core_select(SLOTS.c.expires_at)
        .where(SLOTS.c.draft_id == DRAFTS.c.id, SLOTS.c.grader_id == bindparam("grader_id"))
        .scalar_subquery()
    )
    return (
        _in_batch(core_select(DRAFTS.c.id, expires.label("expires_at")), shape, planned=planned, in_order=False)
        .where(DRAFTS.c.id.in_(unsaved), DRAFTS.c.id.not_in(bindparam("exclude", expanding=True)))
        .order_by(*_queue_order(planned))
        .limit(2)
    )


@lru_cache(maxsize=64)
def candidates_stmt(shape: Shape, skipped: bool, planned: bool) -> Select[int]:
    """Drafts of the batch with a free place where the grader has none, in queue order (50 at most).

    skipped=False leaves out the drafts the grader skipped; skipped=True returns only those.
    A draft's places are counted through the index on grading_slot.draft_id; the grader's places
    and skips are uncorrelated IN subqueries (indexes on grader_id). Both columns are NOT NULL,
    so NOT IN means the same as NOT EXISTS here. Read in queue order (see _in_batch), the scan stops
    at the 50th: 1.3-1.8 -> 0.12 ms on a 1,540-draft run (7 December).
    """
    taken = core_select(func.count()).where(SLOTS.c.draft_id == DRAFTS.c.id).scalar_subquery()
    mine = core_select(SLOTS.c.draft_id).where(SLOTS.c.grader_id == bindparam("grader_id"))
    skips = core_select(SKIPS.c.draft_id).where(SKIPS.c.grader_id == bindparam("grader_id"))
    return (
        _in_batch(core_select(DRAFTS.c.id), shape, planned=planned)
        .where(
            taken < bindparam("n"),
            DRAFTS.c.id.not_in(mine),
            DRAFTS.c.id.not_in(bindparam("exclude", expanding=True)),
            DRAFTS.c.id.in_(skips) if skipped else DRAFTS.c.id.not_in(skips),
        )
        .order_by(*_queue_order(planned))
        .limit(50)
    )


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
