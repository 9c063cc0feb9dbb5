"""The grading queue's index: one row per draft of a run being graded, so the next item and a
batch's progress cost the same on a run of 50 drafts as on one of 50,000.

Why: finding a grader's next draft (the oldest in case order with a free place, not theirs, not
skipped) and a batch's progress (drafts, grades in against needed, mine) used to aggregate every
draft, place and grade of the run on every grading page and save: 4 ms each on a run of 3,080
drafts, growing with the run, and the next-item search ran inside SQLite's one write lock.

`grading_queue` keeps, per draft, what those two questions need: the queue order (case position,
sample, id), the batch filters (category, intent, golden, the draft's intent), whether it is
gradable, how many places are taken and grades are in, and `has_place` (taken < graders_per_draft).
The index (run_id, gradable, has_place, position, sample_index, draft_id) hands the next item over
in queue order without a sort, and the progress counts read narrow rows of one run.

It is derived data, kept exact as follows:
- built lazily per run (`ensure`): the first grading request of a run fills it from the drafts,
  places and grades; drafts added later (their ids are higher) are appended the same way; a new
  graders_per_draft rebuilds it; re-imported drafts (`invalidate`, called by flows after an import)
  drop it so that the next request rebuilds it;
- every change of places or grades updates the counters in the same transaction, as increments
  (`places_changed`, `grade_added`), so concurrent transactions on PostgreSQL cannot overwrite each
  other's counts; a build takes an exclusive advisory lock and counter updates a shared one, so a
  build never misses a place being taken while it reads. A transaction that finds the rows stale
  but present and cannot get the lock at once leaves the update to the next request (waiting
  could deadlock with a writer that holds places); the first build of a run waits.
`tests/grading/test_queue_index.py` checks the counters against a recount after every operation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, bindparam, delete, event, func, literal, text, update
from sqlalchemy import case as sql_case
from sqlalchemy import select as core_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session

from webapp import sql_batch
from webapp.datasets.models import EvalCase
from webapp.db import table_of
from webapp.grading.models import (
    Grade,
    GradingPlan,
    GradingQueueEntry,
    GradingQueueGrader,
    GradingQueueRun,
    GradingSkip,
    GradingSlot,
)
from webapp.runs.models import Draft

QUEUE = table_of(GradingQueueEntry)
QUEUE_RUNS = table_of(GradingQueueRun)
QUEUE_GRADERS = table_of(GradingQueueGrader)
_DRAFTS = table_of(Draft)
_CASES = table_of(EvalCase)
_SLOTS = table_of(GradingSlot)
_GRADES = table_of(Grade)
_SKIPS = table_of(GradingSkip)
_PLAN = table_of(GradingPlan)

# PostgreSQL advisory lock (key, 0): builds take it exclusively, counter updates shared.
PG_QUEUE_LOCK_KEY = 0x47515545  # "GQUE"

Shape = tuple[bool, bool, bool, bool | None]


def _state_of(run_id: Any, drafts: Any) -> list[Any]:
    """The run's last draft id, and the graders_per_draft and last draft its queue rows were built for."""
    return [
        core_select(func.max(drafts.c.id)).where(drafts.c.run_id == run_id).scalar_subquery(),
        core_select(QUEUE_RUNS.c.graders_per_draft).where(QUEUE_RUNS.c.run_id == run_id).scalar_subquery(),
        core_select(QUEUE_RUNS.c.last_draft_id).where(QUEUE_RUNS.c.run_id == run_id).scalar_subquery(),
    ]


_STATE = core_select(*_state_of(bindparam("run_id"), _DRAFTS))


# The same state, found from one of the run's drafts: read together with a request's first
# statements (webapp.sql_batch) and kept for ensure (prefetch_state), it costs no round trip.
_STATE_OF_DRAFT = core_select(
    _DRAFTS.c.run_id, *_state_of(_DRAFTS.c.run_id, _DRAFTS.alias("run_drafts"))
).where(_DRAFTS.c.id == bindparam("draft_id"))
_PREFETCHED = "grading_queue_state"  # session.info: run_id -> the state read with other statements


def state_read(draft_id: int) -> sql_batch.Item:
    """The statement reading the queue state of a draft's run, to send with others; pass its row to prefetch_state."""
    return (_STATE_OF_DRAFT, {"draft_id": draft_id})


def prefetch_state(session: Session, row: Any) -> None:
    """Keep a state_read row for this transaction's next ensure of that run (no row: the draft does not exist)."""
    if row is not None:
        run_id, last_draft, n, last_indexed = tuple(row)
        session.info.setdefault(_PREFETCHED, {})[int(run_id)] = (last_draft, n, last_indexed)


_LOCK_HELD = (
    "grading_queue_lock"  # session.info: the advisory lock this transaction holds ("shared"/"exclusive")
)


_LOCKS = {
    exclusive: core_select(getattr(func, name)(bindparam("k", type_=Integer), literal(0, Integer)))
    for exclusive, name in ((True, "pg_advisory_xact_lock"), (False, "pg_advisory_xact_lock_shared"))
}


def _lock(session: Session, *, exclusive: bool) -> None:
    """Take the queue's advisory lock for the transaction, once (a save changes places and grades)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    held = session.info.get(_LOCK_HELD)
    if held == "exclusive" or (held == "shared" and not exclusive):
        return
    # Sent with the statement that follows (webapp.sql_batch.defer): that one runs after the lock is held.
    sql_batch.defer(session, _LOCKS[exclusive], {"k": PG_QUEUE_LOCK_KEY})
    session.info[_LOCK_HELD] = "exclusive" if exclusive else "shared"


def _try_exclusive(session: Session) -> bool:
    if session.get_bind().dialect.name != "postgresql":
        return True
    if session.info.get(_LOCK_HELD) == "exclusive":
        return True
    stmt = text("SELECT pg_try_advisory_xact_lock(:k, 0)")
    got = bool(session.connection().execute(stmt, {"k": PG_QUEUE_LOCK_KEY}).scalar())
    if got:
        session.info[_LOCK_HELD] = "exclusive"
    return got


def _count(table: Any) -> Any:
    return core_select(func.count()).where(table.c.draft_id == _DRAFTS.c.id).scalar_subquery()


def _planned_ok() -> Any:
    """True for a draft in its run's grading plan, or in a run without one (outer-joined to the plan)."""
    any_plan = _PLAN.alias("any_plan")  # not the outer-joined plan row: a run-wide look
    planned_run = core_select(any_plan.c.draft_id).where(any_plan.c.run_id == _DRAFTS.c.run_id).exists()
    return _PLAN.c.draft_id.is_not(None) | ~planned_run


def _build_stmt(dialect: str) -> Any:
    n = bindparam("n", type_=Integer)
    taken = _count(_SLOTS)
    rows = (
        core_select(
            _DRAFTS.c.id,
            _DRAFTS.c.run_id,
            # a run with a grading plan (a PPI sample) is graded in the plan's random order
            func.coalesce(_PLAN.c.rank, _CASES.c.position),
            _DRAFTS.c.sample_index,
            _CASES.c.category,
            _CASES.c.intent,
            _CASES.c.golden,
            _DRAFTS.c.intent,
            sql_case((_DRAFTS.c.draft_text.is_not(None) & _DRAFTS.c.escalated.is_(False) & _planned_ok(), True), else_=False),
            taken,
            sql_case((taken < n, True), else_=False),
            _count(_GRADES),
        )
        .join(_CASES, _CASES.c.id == _DRAFTS.c.case_pk)
        .outerjoin(_PLAN, _PLAN.c.draft_id == _DRAFTS.c.id)
        .where(_DRAFTS.c.run_id == bindparam("run_id"), _DRAFTS.c.id > bindparam("after"))
    )
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    columns = [
        "draft_id", "run_id", "position", "sample_index", "category", "intent", "golden", "draft_intent",
        "gradable", "places_taken", "has_place", "grades_in",
    ]  # fmt: skip
    return insert(QUEUE).from_select(columns, rows).on_conflict_do_nothing()


def _mark_stmt(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(QUEUE_RUNS).values(
        run_id=bindparam("run_id"), graders_per_draft=bindparam("n"), last_draft_id=bindparam("last")
    )
    return stmt.on_conflict_do_update(
        index_elements=[QUEUE_RUNS.c.run_id],
        set_={
            "graders_per_draft": stmt.excluded.graders_per_draft,
            "last_draft_id": stmt.excluded.last_draft_id,
        },
    )


def _capped(n: Any) -> Any:
    return sql_case((QUEUE.c.grades_in > n, n), else_=QUEUE.c.grades_in)


_RUN_ROWS = (QUEUE.c.run_id == bindparam("r"), QUEUE.c.gradable.is_(True))
_RUN_TOTALS = (
    update(QUEUE_RUNS)
    .where(QUEUE_RUNS.c.run_id == bindparam("r"))
    .values(
        drafts=core_select(func.count()).where(*_RUN_ROWS).scalar_subquery(),
        grades_done=core_select(func.coalesce(func.sum(_capped(bindparam("n", type_=Integer))), 0))
        .where(*_RUN_ROWS)
        .scalar_subquery(),
    )
)


_GRADER_TOTALS = QUEUE_GRADERS.insert().from_select(
    ["run_id", "grader_id", "grades"],
    core_select(QUEUE.c.run_id, _GRADES.c.grader_id, func.count())
    .join(QUEUE, QUEUE.c.draft_id == _GRADES.c.draft_id)
    .where(*_RUN_ROWS)
    .group_by(QUEUE.c.run_id, _GRADES.c.grader_id),
)


# session.info key: the (run_id, graders_per_draft) pairs found or made current in this transaction.
# A save-and-next asked up to five times per request (each step that reads the queue makes sure of
# it); now the first one reads and the others trust it until the transaction ends, the run is
# invalidated or drafts are flushed.
_CURRENT = "grading_queue_current"


@event.listens_for(Session, "after_transaction_end")
def _forget_current(session: Session, transaction: Any) -> None:
    session.info.pop(_CURRENT, None)
    session.info.pop(_PREFETCHED, None)
    # transaction-scoped advisory locks end with it (or with a savepoint rolled back): taken anew
    session.info.pop(_LOCK_HELD, None)
    if transaction.parent is None:  # the whole transaction ended (a rollback: its run totals go too)
        session.info.pop(_RUN_GRADES_PENDING, None)


@event.listens_for(Session, "before_flush")
def _drafts_added(session: Session, context: Any, instances: Any) -> None:
    if _CURRENT in session.info and any(isinstance(o, Draft) for o in session.new):
        session.info.pop(_CURRENT, None)


def carry_over(session: Session) -> Callable[[], None]:
    """Before a commit in the middle of a request: return what puts back, after it, the runs found current.

    The page a save-and-next renders right after its write section's commit trusts the check that
    section made milliseconds before, instead of reading the queue's state again. A rollback in
    between is not carried over (the caller calls this only after a commit that succeeded).
    """
    known = set(session.info.get(_CURRENT, ()))

    def restore() -> None:
        if known:
            session.info.setdefault(_CURRENT, set()).update(known)

    return restore


def _read_state(session: Session, run_id: int) -> tuple[Any, Any, Any]:
    last_draft, n, last_indexed = tuple(sql_batch.together(session, (_STATE, {"run_id": run_id}))[0].one())
    return last_draft, n, last_indexed


def ensure(*, session: Session, run_id: int, graders_per_draft: int) -> None:
    """Make the run's queue rows current (one indexed read when they are; see the module docstring)."""
    session.flush()  # drafts added through the ORM in this transaction count
    known: set[tuple[int, int]] = session.info.setdefault(_CURRENT, set())
    if (run_id, graders_per_draft) in known:
        return
    prefetched = session.info.get(_PREFETCHED, {}).pop(run_id, None)
    if prefetched is not None:
        last_draft, n, last_indexed = prefetched
    else:
        last_draft, n, last_indexed = _read_state(session, run_id)
    if last_draft is None:
        return
    if n == graders_per_draft and last_indexed is not None and last_indexed >= last_draft:
        known.add((run_id, graders_per_draft))
        return
    conn = session.connection()
    if n is not None and not _try_exclusive(session):
        # Another transaction is taking places while this one may hold places of its own (the
        # shared lock): waiting here could deadlock. The rows are there, only not current; the
        # next request brings them up to date.
        return
    _lock(session, exclusive=True)
    if n is None and session.get_bind().dialect.name == "postgresql":
        # the run's first build, waited for: another request may have built it meanwhile (50
        # graders opening a new run at once made 50 builds in a row without this second look)
        last_draft, n, last_indexed = _read_state(session, run_id)
        if n == graders_per_draft and last_indexed is not None and last_indexed >= last_draft:
            known.add((run_id, graders_per_draft))
            return
    after = last_indexed if n == graders_per_draft and last_indexed is not None else 0
    # the rebuild counts the run's grades from the grades themselves, this transaction's included
    owed = [p for p in session.info.get(_RUN_GRADES_PENDING, []) if p["r"] != run_id]
    session.info[_RUN_GRADES_PENDING] = owed
    if after == 0:
        conn.execute(delete(QUEUE).where(QUEUE.c.run_id == run_id))
    dialect = session.get_bind().dialect.name
    conn.execute(_build_stmt(dialect), {"run_id": run_id, "after": after, "n": graders_per_draft})
    conn.execute(_mark_stmt(dialect), {"run_id": run_id, "n": graders_per_draft, "last": last_draft})
    conn.execute(_RUN_TOTALS, {"r": run_id, "n": graders_per_draft})
    conn.execute(delete(QUEUE_GRADERS).where(QUEUE_GRADERS.c.run_id == run_id))
    conn.execute(_GRADER_TOTALS, {"r": run_id})
    if dialect == "postgresql":
        # fresh statistics now, not when autovacuum next looks: with the old ones (a run's rows
        # counted as 2 instead of 3,080) the planner scanned the whole run for a grader's held draft
        conn.execute(text(f"ANALYZE {QUEUE.name}"))
    known.add((run_id, graders_per_draft))


def invalidate(*, session: Session, run_id: int) -> None:
    """Drop the run's queue rows (its drafts were re-imported); the next grading request rebuilds them."""
    session.flush()
    session.info.pop(_CURRENT, None)
    conn = session.connection()
    conn.execute(delete(QUEUE_GRADERS).where(QUEUE_GRADERS.c.run_id == run_id))
    conn.execute(delete(QUEUE_RUNS).where(QUEUE_RUNS.c.run_id == run_id))
    conn.execute(delete(QUEUE).where(QUEUE.c.run_id == run_id))


# has_place compares with the graders_per_draft the run's rows were built for (a new one rebuilds them).
_N = (
    core_select(QUEUE_RUNS.c.graders_per_draft).where(QUEUE_RUNS.c.run_id == QUEUE.c.run_id).scalar_subquery()
)
_PLACES = (
    update(QUEUE)
    .where(QUEUE.c.draft_id == bindparam("d"))
    .values(
        places_taken=QUEUE.c.places_taken + bindparam("delta", type_=Integer),
        has_place=sql_case(
            (QUEUE.c.places_taken + bindparam("delta", type_=Integer) < _N, True), else_=False
        ),
    )
)
_GRADE_ADDED = update(QUEUE).where(QUEUE.c.draft_id == bindparam("d")).values(grades_in=QUEUE.c.grades_in + 1)
# The run's total moves when the grade is one of the draft's first graders_per_draft (grades_in
# after _GRADE_ADDED). One row per run that every save changes: on PostgreSQL its row lock is held
# from the UPDATE to the commit, and run early in the save it serialized all graders of the run
# (50 graders: most of them waited on it). So the UPDATE runs at commit (before_commit below):
# the lock is held for that statement and the commit only.
_RUN_GRADE_ADDED = (
    update(QUEUE_RUNS)
    .where(QUEUE_RUNS.c.run_id == bindparam("r"), bindparam("g") <= QUEUE_RUNS.c.graders_per_draft)
    .values(grades_done=QUEUE_RUNS.c.grades_done + 1)
)
_RUN_GRADES_PENDING = "grading_queue_run_grades"


@event.listens_for(Session, "before_commit")
def settle(session: Session) -> None:
    """Apply the run totals this transaction still owes (at commit, or before it reads them itself)."""
    pending = session.info.pop(_RUN_GRADES_PENDING, None)
    for params in pending or ():
        sql_batch.defer(session, _RUN_GRADE_ADDED, params)  # on PostgreSQL, sent with the commit


def places_changed(*, session: Session, deltas: dict[int, int]) -> None:
    """Record places taken (+k) or given back (-k) per draft, in the transaction that changed them."""
    params = [{"d": d, "delta": k} for d, k in deltas.items() if k]
    if params:
        _lock(session, exclusive=False)
        for one in params:  # nobody reads the result: sent with the transaction's next statement
            sql_batch.defer(session, _PLACES, one)


def place_taken(*, session: Session, draft_id: int) -> None:
    """Record one place of the draft taken."""
    places_changed(session=session, deltas={draft_id: 1})


def places_released(*, session: Session, draft_ids: Iterable[int]) -> None:
    """Record places given back (one per occurrence of a draft id)."""
    places_changed(session=session, deltas={d: -k for d, k in Counter(draft_ids).items()})


@lru_cache(maxsize=4)
def _grader_added_stmt(dialect: str) -> Any:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(QUEUE_GRADERS).from_select(
        ["run_id", "grader_id", "grades"],
        core_select(QUEUE.c.run_id, bindparam("g", type_=Integer), literal(1, Integer)).where(
            QUEUE.c.draft_id == bindparam("d"), QUEUE.c.gradable.is_(True)
        ),
    )
    return stmt.on_conflict_do_update(
        index_elements=[QUEUE_GRADERS.c.run_id, QUEUE_GRADERS.c.grader_id],
        set_={"grades": QUEUE_GRADERS.c.grades + 1},
    )


_QUEUE_ROW = core_select(QUEUE.c.run_id, QUEUE.c.gradable, QUEUE.c.grades_in).where(
    QUEUE.c.draft_id == bindparam("draft_id")
)


def queue_row_read(draft_id: int) -> sql_batch.Item:
    """The statement reading a draft's queue row (run, gradable, grades in), to send with others; see grade_added."""
    return (_QUEUE_ROW, {"draft_id": draft_id})


def grade_added(*, session: Session, draft_id: int, grader_id: int, queue_row: Any) -> None:
    """Record a new grade of the draft by the grader.

    `queue_row` is the queue_row_read row (None: the draft has no queue row yet), read in this
    transaction while holding the draft's row lock (webapp.grading.grades.lock_draft): only a grade
    of that draft, made under the same lock, or a rebuild, which counts from the grades themselves,
    changes grades_in. So the counter update is sent with the next statement instead of waiting
    for its answer.
    """
    _lock(session, exclusive=False)
    sql_batch.defer(session, _GRADE_ADDED, {"d": draft_id})
    if queue_row is not None and queue_row.gradable:
        params = {"r": queue_row.run_id, "g": queue_row.grades_in + 1}  # grades_in after this grade
        if session.in_nested_transaction():  # a savepoint may roll back: no deferring past it
            session.connection().execute(_RUN_GRADE_ADDED, params)
        else:
            session.info.setdefault(_RUN_GRADES_PENDING, []).append(params)
    sql_batch.defer(
        session, _grader_added_stmt(session.get_bind().dialect.name), {"d": draft_id, "g": grader_id}
    )


def _in_batch(stmt: Any, shape: Shape) -> Any:
    category, intent, draft_intent, golden = shape
    stmt = stmt.where(QUEUE.c.run_id == bindparam("run_id"), QUEUE.c.gradable.is_(True))
    if category:
        stmt = stmt.where(QUEUE.c.category == bindparam("category"))
    if intent:
        stmt = stmt.where(QUEUE.c.intent == bindparam("intent"))
    if draft_intent:
        stmt = stmt.where(QUEUE.c.draft_intent == bindparam("draft_intent"))
    if golden is not None:
        stmt = stmt.where(QUEUE.c.golden.is_(golden))
    return stmt


_ORDER = (QUEUE.c.position, QUEUE.c.sample_index, QUEUE.c.draft_id)


@lru_cache(maxsize=64)
def held_stmt(shape: Shape) -> Any:
    """The first two drafts of the batch the grader holds a reservation of (no grade yet), with their expiry.

    Two: a save-and-next moves on to the first and shows the second as the one after it.

    The grader's open places (a handful) are read first, in a MATERIALIZED CTE, and only they are
    looked up in the queue: left to itself, PostgreSQL's planner walked the run's whole queue
    (3,080 rows, 2.5 ms, three times per save) whenever its statistics predated the queue's build.
    """
    mine = (
        core_select(_SLOTS.c.draft_id, _SLOTS.c.expires_at)
        .where(_SLOTS.c.grader_id == bindparam("grader_id"), _SLOTS.c.grade_id.is_(None))
        .cte("mine")
        .prefix_with("MATERIALIZED")
    )
    return (
        _in_batch(core_select(QUEUE.c.draft_id.label("id"), mine.c.expires_at), shape)
        .select_from(mine.join(QUEUE, QUEUE.c.draft_id == mine.c.draft_id))
        .where(QUEUE.c.draft_id.not_in(bindparam("exclude", expanding=True)))
        .order_by(*_ORDER)
        .limit(2)
    )


@lru_cache(maxsize=128)
def candidates_stmt(shape: Shape, skipped: bool) -> Any:
    """Drafts of the batch with a free place where the grader has none, in queue order (50 at most).

    skipped=False leaves out the drafts the grader skipped; skipped=True returns only those.

    The grader's places and skips are uncorrelated `IN` subqueries, which PostgreSQL reads once
    into a hash (a "hashed SubPlan") whatever its statistics say. As correlated NOT EXISTS, with
    statistics older than the grader's places (autovacuum late or off), the planner estimated 6
    places where there were 764 and joined each queue row against all of them: 28 ms instead of
    0.9 ms, growing with the square of the grader's progress. Both columns are NOT NULL, so
    NOT IN means the same as NOT EXISTS here.
    """
    mine = core_select(_SLOTS.c.draft_id).where(_SLOTS.c.grader_id == bindparam("grader_id"))
    skip = core_select(_SKIPS.c.draft_id).where(_SKIPS.c.grader_id == bindparam("grader_id"))
    return (
        _in_batch(core_select(QUEUE.c.draft_id), shape)
        .where(
            QUEUE.c.has_place.is_(True),
            QUEUE.c.draft_id.not_in(mine),
            QUEUE.c.draft_id.not_in(bindparam("exclude", expanding=True)),
            QUEUE.c.draft_id.in_(skip) if skipped else QUEUE.c.draft_id.not_in(skip),
        )
        .order_by(*_ORDER)
        .limit(50)
    )


@lru_cache(maxsize=64)
def counts_stmt(shape: Shape) -> Any:
    """(drafts, grades in counted up to graders_per_draft each, the grader's grades) of the batch.

    The whole run's first two come from its totals row; a filtered batch reads its queue rows.
    """
    n = bindparam("n", type_=Integer)
    # Read from the grader's own grades (index on grader_id), each looked up in the queue by its draft.
    in_batch = _in_batch(core_select(QUEUE.c.draft_id), shape).where(QUEUE.c.draft_id == _GRADES.c.draft_id)
    mine = (
        core_select(func.count())
        .select_from(_GRADES)
        .where(_GRADES.c.grader_id == bindparam("grader_id"), in_batch.exists())
        .scalar_subquery()
    )
    if shape == (False, False, False, None):
        mine_in_run = (
            core_select(QUEUE_GRADERS.c.grades)
            .where(
                QUEUE_GRADERS.c.run_id == bindparam("run_id"),
                QUEUE_GRADERS.c.grader_id == bindparam("grader_id"),
            )
            .scalar_subquery()
        )
        return core_select(
            QUEUE_RUNS.c.drafts, QUEUE_RUNS.c.grades_done, func.coalesce(mine_in_run, 0)
        ).where(QUEUE_RUNS.c.run_id == bindparam("run_id"))
    return _in_batch(core_select(func.count(), func.coalesce(func.sum(_capped(n)), 0), mine), shape)
