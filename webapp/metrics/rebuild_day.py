"""One day's figures in `draftdesk metrics rebuild`: computed outside the write lock, written in short transactions.

Issue 41. Profiled on SQLite (a 50,000-event day, all pending as after a bulk load, load average
6 on 2 cores): reading the day took 0.35 s and aggregating it 0.22 s, both outside any write
transaction already; the write transaction took 0.76 s, of which 0.67 s went to marking the
50,000 pending events merged (a row and two index entries each: the partial pending index and the
covering latency index) and 4 ms to replacing the day's 56 aggregate rows. At 1,400 events a day
the write was 31 ms (21 ms marking). So the write lock's hold was the marking, and it grew with the
day's size. Now a day's pending events are marked merged at most MARK_BATCH at a time, each batch
in its own short write transaction (a range of ids through the partial index
ix_metric_event_pending_day), and each of those transactions also writes the day's figures of
exactly the events that are merged once it commits:

    step k (k = 1..K): the day's non-pending events in the read (B) plus the first k batches of its
    pending ones (P1..Pk, in id order) are aggregated outside the lock; then one write transaction
    marks Pk merged, checks that nothing else changed the day, and replaces the day's rows with the
    aggregate of B + P1..Pk. The last step aggregates the whole read, in its own row order, so the
    figures are bit for bit those of a one-shot aggregation. A day with nothing pending is one step.

Why a crash, a concurrent merge or a concurrent ingestion neither loses nor double-counts an event:
- The invariant of the stored figures (models.DailyAggregate) is "a day's rows aggregate exactly its
  events that are not pending". Each step's transaction flips the pending flag of its batch and
  writes the rows that count exactly the merged events, atomically: after every commit the
  invariant holds, so a process killed between two steps (or two days) leaves a consistent day. The
  resumed rebuild starts that day again from a fresh read (the progress row names the last day
  finished, written by the day's last step), and the rows are always recomputed, never added to,
  so a batch merged before the crash is counted once.
- Inside each step's transaction, after marking, the step checks that the update marked exactly
  its batch (rowcount) and that the day's merged events are exactly as many as the read's merged
  ones plus the batches so far. Pending flags only go from true to false and events are only
  inserted (pending) or pruned with their whole day (the retention guard is checked first), so
  equal counts mean the same merged set. If another writer merged or rebuilt the day in between
  (the background pass, an import), the transaction is rolled back and the day is read again
  (up to ATTEMPTS times; then it is recomputed inside one write transaction, as before issue 41).
- Events that arrive for the day after the read are pending and outside the read: they are not
  marked (a later id, or the rowcount check refuses the batch) and not counted; their stale-day
  mark (committed with them) has the background pass merge them. So today's day, while events keep
  arriving, is rebuilt without retries.

PostgreSQL: the steps take the day's advisory lock (driver_rows.lock_days) as every rebuild and
merge of a day does, so those run one after the other; ingestion takes no lock and is covered by the
checks above (under READ COMMITTED the counts run after the update, so a batch committed before
the update is seen by the counts and refuses the step, one committed after it is neither marked
nor counted). A grade save never waits for the rebuild there: the rebuild's transactions lock only
rows of metric_event, metric_daily_aggregate and metric_rebuild_progress (row locks, taken by
UPDATE and DELETE) and the metrics' advisory day locks, none of which a grade save touches or
takes (it writes grading rows and a fact); PostgreSQL readers never wait for writers (MVCC), and
no statement of the rebuild takes a table lock beyond ROW EXCLUSIVE, which conflicts with no
other writer's. The single write lock that made grade saves wait is SQLite's.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from webapp.core.db import session_scope, table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import watermark
from webapp.metrics.aggregates import (
    PENDING,
    InsertRow,
    compute_aggregates,
    raw_frame,
    rebuild_days,
    replace_days,
)
from webapp.metrics.driver_rows import lock_days
from webapp.metrics.models import Event

# Pending events marked merged per write transaction. Measured on SQLite at load 15 on 2 cores: a
# step of 10,000 held the write lock ~0.3 s (0.2 s of it the marking), one of 5,000 ~0.1-0.15 s.
# Each step's aggregation (outside the lock, ~0.1-0.2 s) is the price of a smaller batch; it is paid
# only for pending events, which in steady state the background pass has merged already.
MARK_BATCH = 5_000
# Reads of a day before it is recomputed inside one write transaction (another writer changed it each time).
ATTEMPTS = 4
# Called inside the day's last write transaction (the caller records its progress there).
OnWritten = Callable[[Session], None]


@dataclass
class DayResult:
    """What rebuilding one day did: the aggregate rows written and each write transaction's duration."""

    rows: int = 0
    holds: list[float] = field(default_factory=list)  # seconds from BEGIN to COMMIT of each write transaction
    retries: int = 0
    recomputed_in_lock: bool = False
    closed: bool = False  # pruned meanwhile: its figures are final and were left alone


@dataclass(frozen=True)
class Step:
    """One write transaction of a day: the pending ids lo..hi to mark (n of them) and the figures after it."""

    lo: int
    hi: int
    n: int
    merged_after: int  # the day's merged events once this step commits
    records: list[InsertRow]


class DayChanged(Exception):
    """Another writer changed the day's events since the read: the step is rolled back and the day read again."""


def step_count(frame: pd.DataFrame, batch: int) -> int:
    """Return how many write transactions steps() makes of a day's read: one per batch of pending events, at least one."""
    n = int(frame["pending"].astype(bool).to_numpy().sum())
    return max(1, -(-n // batch))


def steps(frame: pd.DataFrame, spec: EvalSpec, batch: int) -> Iterator[Step]:
    """Yield a day's steps from its events read with ids (raw_frame(with_ids=True)); each step's figures computed lazily."""
    pending = frame["pending"].astype(bool)
    data = frame.drop(columns=["id", "pending"])
    merged = len(frame) - int(pending.to_numpy().sum())
    ids = sorted(int(i) for i in frame.loc[pending, "id"].tolist())
    if not ids:
        yield Step(0, 0, 0, merged, compute_aggregates(data, spec))
        return
    order = frame["id"].astype(int)
    for start in range(0, len(ids), batch):
        end = min(start + batch, len(ids))
        # the last step aggregates the whole read in its own order: the one-shot aggregation's figures
        part = data if end == len(ids) else data.loc[~pending | (pending & (order <= ids[end - 1]))]
        yield Step(ids[start], ids[end - 1], end - start, merged + end, compute_aggregates(part, spec))


def _mark_range(session: Session, day: dt.date, lo: int, hi: int) -> int:
    """Mark the day's pending events with ids lo..hi merged (the partial pending index, by range); return how many."""
    e = table_of(Event)
    stmt = update(e).where(e.c.day == day, PENDING, e.c.id >= lo, e.c.id <= hi).values(pending=False)
    return int(getattr(session.execute(stmt), "rowcount", 0))


def merged_events(session: Session, day: dt.date) -> int:
    """Count the day's merged (not pending) events: all of them less the pending ones (two index-only counts)."""
    e = table_of(Event).c
    total = session.execute(select(func.count()).where(e.day == day)).scalar_one()
    waiting = session.execute(select(func.count()).where(e.day == day, PENDING)).scalar_one()
    return int(total) - int(waiting)


def _write(engine: Engine, day: dt.date, step: Step, result: DayResult, on_written: OnWritten | None) -> bool:
    """Run one step's write transaction; False when the day was pruned meanwhile. Raises DayChanged (rolled back)."""
    t0 = time.perf_counter()
    try:
        with session_scope(engine) as session:
            if not watermark.days_open_to_rebuild(session, [day]):
                return False
            lock_days(session, [day])
            if step.n and _mark_range(session, day, step.lo, step.hi) != step.n:
                raise DayChanged(f"{day}: the pending events {step.lo}..{step.hi} are not the ones read")
            if merged_events(session, day) != step.merged_after:
                raise DayChanged(f"{day}: merged or rebuilt by another writer since the read")
            replace_days(session, [day], step.records)
            if on_written is not None:
                on_written(session)
        return True
    finally:
        result.holds.append(time.perf_counter() - t0)


def rebuild_day(
    engine: Engine, spec: EvalSpec, day: dt.date, *, on_done: OnWritten | None = None, batch: int | None = None
) -> DayResult:
    """Recompute one day's figures from its events, the write lock held for at most `batch` events' marking at a time.

    `on_done` runs inside the day's last write transaction (the rebuild's progress is saved there);
    `batch` defaults to MARK_BATCH.
    """
    batch = batch or MARK_BATCH
    result = DayResult()
    for attempt in range(ATTEMPTS):
        with session_scope(engine, write=False) as session:
            frame = raw_frame(session, days=[day], with_ids=True)
        total = step_count(frame, batch)
        try:
            for i, step in enumerate(steps(frame, spec, batch), 1):
                if not _write(engine, day, step, result, on_done if i == total else None):
                    result.closed = True
                    return result
                result.rows = len(step.records)
        except DayChanged:
            result.retries = attempt + 1
            continue
        return result
    # another writer kept changing the day: recompute it inside one write transaction (exact, longer)
    t0 = time.perf_counter()
    with session_scope(engine) as session:
        result.rows = rebuild_days(session=session, spec=spec, days=[day])
        if on_done is not None:
            on_done(session)
    result.holds.append(time.perf_counter() - t0)
    result.recomputed_in_lock = True
    return result

