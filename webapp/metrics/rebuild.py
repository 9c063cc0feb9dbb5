"""`draftdesk metrics rebuild`: every event's day and every day's figures, a day per short transaction, resumable.

Issue 41: the rebuild used to be one transaction over every event (all ids in memory, SQLite's
write lock held from start to end, so a grade saved meanwhile waited for minutes). Now:

1. Days ("days" phase). For each day label the events carry, in order, one transaction gives the
   events of that label their day in the spec's time zone (after a zone change). The mapping from a
   time to its day is monotonic, so a label whose first and last event already map to it is right
   for every event between: the usual rebuild (no zone change) reads two values per day.
2. Figures ("figures" phase). For each day with events or stored figures (on or after the retention
   watermark: days before it keep their figures, watermark.py), the day's events are read and
   aggregated outside any write transaction; then one short write transaction replaces the day's
   stored rows, marks the pending events it read as merged, and records the progress. If events of
   that day arrived between the read and the write (their count differs), the day is recomputed
   inside the write transaction instead, so no event is lost or counted twice.
3. The stale-day marks that existed at the start are deleted at the end (every day was rebuilt
   since); marks made meanwhile stay for the background pass.

The progress (phase and last day done) is stored in metric_rebuild_progress and committed with each
day, so a killed rebuild continues with the next day; a rebuild in another time zone than the
unfinished one starts over. Between two days the write lock is free: a grade save waits for at most
one day's write, not for the rebuild (benchmarks/bench_rebuild_grade.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from webapp.core.db import session_scope, table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.metrics import watermark
from webapp.metrics.aggregates import (
    chunks,
    compute_aggregates,
    mark_merged,
    raw_frame,
    rebuild_days,
    replace_days,
)
from webapp.metrics.driver_rows import lock_days
from webapp.metrics.event_days import as_date
from webapp.metrics.models import DailyAggregate, Event, RebuildProgress, StaleDay

PROGRESS_ID = 1
# Called after each day: (phase, days done in the phase, days in the phase).
OnDay = Callable[[str, int, int], None]


@dataclass
class RebuildReport:
    """What a rebuild did: the days relabelled and rebuilt, the aggregate rows written, where it resumed from."""

    relabelled_events: int = 0
    days: int = 0
    rows: int = 0
    resumed: str = ""  # "" for a fresh start, else "<phase> after <day>"


def _zone(spec: EvalSpec) -> str:
    return str(spec.tz)


def _start(engine: Engine, spec: EvalSpec, *, restart: bool) -> RebuildProgress:
    """Return the unfinished rebuild's progress (in this time zone), or record a new one; committed."""
    with session_scope(engine) as session:
        row = session.get(RebuildProgress, PROGRESS_ID)
        if row is not None and (restart or row.tz != _zone(spec)):
            session.delete(row)
            session.flush()
            row = None
        if row is None:
            marks = session.execute(select(func.max(col(StaleDay.id)))).scalar_one() or 0
            row = RebuildProgress(id=PROGRESS_ID, tz=_zone(spec), phase="days", marks_upto=int(marks))
            session.add(row)
        session.flush()
        session.expunge(row)
        return row


def _save_progress(session: Session, phase: str, day: dt.date | None) -> None:
    t = table_of(RebuildProgress)
    session.execute(update(t).where(t.c.id == PROGRESS_ID).values(phase=phase, done_through=day, updated_at=utcnow()))


def _labels_after(engine: Engine, after: dt.date | None) -> list[dt.date]:
    e = table_of(Event).c
    stmt = select(e.day).distinct().order_by(e.day)
    if after is not None:
        stmt = stmt.where(e.day > after)
    with session_scope(engine, write=False) as session:
        return [as_date(d) for d in session.execute(stmt).scalars()]


def _relabel(session: Session, spec: EvalSpec, label: dt.date) -> int:
    """Give the events labelled `label` their day in the spec's time zone; return how many moved."""
    e = table_of(Event)
    tz = spec.tz
    first, last = session.execute(select(func.min(e.c.occurred_at), func.max(e.c.occurred_at)).where(e.c.day == label)).one()
    if first is None or (as_utc(first).astimezone(tz).date() == label and as_utc(last).astimezone(tz).date() == label):
        return 0
    rows = session.execute(select(e.c.id, e.c.occurred_at).where(e.c.day == label)).all()
    moves = [{"b_id": r[0], "b_day": d} for r in rows if (d := as_utc(r[1]).astimezone(tz).date()) != label]
    for chunk in chunks(moves, 5000):
        session.execute(e.update().where(e.c.id == bindparam("b_id")).values(day=bindparam("b_day")), chunk)
    return len(moves)


def _figure_days(engine: Engine, after: dt.date | None) -> list[dt.date]:
    """Return the days whose figures the rebuild recomputes: with events or stored rows, on or after the watermark."""
    e, a = table_of(Event).c, table_of(DailyAggregate).c
    with session_scope(engine, write=False) as session:
        floor = watermark.pruned_before(session)
        days: set[dt.date] = set()
        for column in (e.day, a.day):
            stmt = select(column).distinct()
            if floor is not None:
                stmt = stmt.where(column >= floor)
            days |= {as_date(d) for d in session.execute(stmt).scalars()}
    return sorted(d for d in days if after is None or d > after)


def _rebuild_day(engine: Engine, spec: EvalSpec, day: dt.date) -> int:
    """Recompute one day's figures: read and aggregate outside the write lock, then write in one short transaction."""
    e = table_of(Event).c
    with session_scope(engine, write=False) as session:
        frame = raw_frame(session, days=[day], with_ids=True)
    records = compute_aggregates(frame.drop(columns=["id", "pending"]), spec)
    with session_scope(engine) as session:
        if not watermark.days_open_to_rebuild(session, [day]):
            return 0  # pruned meanwhile: its figures are final
        lock_days(session, [day])
        stored = session.execute(select(func.count()).where(e.day == day)).scalar_one()
        if stored != len(frame):  # events of the day arrived since the read: recompute it here, under the lock
            n = rebuild_days(session=session, spec=spec, days=[day])
        else:
            mark_merged(session, frame.loc[frame["pending"].astype(bool), "id"].tolist())
            replace_days(session, [day], records)
            n = len(records)
        _save_progress(session, "figures", day)
    return n


def rebuild_by_day(*, engine: Engine, spec: EvalSpec, restart: bool = False, on_day: OnDay | None = None) -> RebuildReport:
    """Recompute every event's day and every day's figures, a day per transaction; continue an unfinished rebuild."""
    progress = _start(engine, spec, restart=restart)
    report = RebuildReport(resumed=f"{progress.phase} after {progress.done_through}" if progress.done_through else "")
    if progress.phase == "days":
        labels = _labels_after(engine, progress.done_through)
        for i, label in enumerate(labels, 1):
            with session_scope(engine) as session:
                report.relabelled_events += _relabel(session, spec, label)
                _save_progress(session, "days", label)
            if on_day:
                on_day("days", i, len(labels))
        with session_scope(engine) as session:
            _save_progress(session, "figures", None)
        progress.done_through = None
    days = _figure_days(engine, progress.done_through)
    for i, day in enumerate(days, 1):
        report.rows += _rebuild_day(engine, spec, day)
        report.days += 1
        if on_day:
            on_day("figures", i, len(days))
    with session_scope(engine) as session:
        s = table_of(StaleDay)
        session.execute(delete(s).where(s.c.id <= progress.marks_upto))
        session.execute(delete(table_of(RebuildProgress)).where(table_of(RebuildProgress).c.id == PROGRESS_ID))
    return report
