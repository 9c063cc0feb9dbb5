"""The grading queue's statements: a batch's progress counts, the grader's held drafts and the next-draft candidates.

Built from the batch's shape (which filters are set) and whether the run has a grading plan, with
bind parameters, once per shape (lru_cache: building them cost more than running them, 7 December),
and executed by webapp/grading/queue.py as Core statements (tables from webapp.core.db.table_of).
Each reads what it needs through indexes rather than every draft of the run (docs/benchmarks.md).
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from typing import TypeVar

from sqlalchemy import ColumnElement, Select, and_, bindparam, func
from sqlalchemy import case as sql_case
from sqlalchemy import select as core_select
from sqlmodel import Session

from webapp.core.db import table_of
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
# A select of drafts narrowed by _in_batch, which keeps its columns.
S = TypeVar("S", bound=Select)  # a bare Select: any columns

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
