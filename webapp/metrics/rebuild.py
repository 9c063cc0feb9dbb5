"""`draftdesk metrics rebuild`: every event's day and every day's figures, in short transactions, resumable.

Issue 41: the rebuild used to be one transaction over every event (all ids in memory, SQLite's
write lock held from start to end, so a grade saved meanwhile waited for minutes). Now:

1. Days ("days" phase). For each day label the events carry, in order, the label's events are read
   outside the write lock and those whose day in the spec's time zone differs (after a zone change)
   are moved, RELABEL_BATCH per write transaction. The mapping from a time to its day is monotonic,
   so a label whose first and last event already map to it is right for every event between: the
   usual rebuild (no zone change) reads two values per day and writes only its progress.
2. Figures ("figures" phase). For each day with events or stored figures (on or after the retention
   watermark: days before it keep their figures, watermark.py), rebuild_day.rebuild_day reads and
   aggregates the day outside any write transaction, then writes it in short transactions that each
   mark at most MARK_BATCH of its pending events merged together with the figures of exactly the
   merged events (why this neither loses nor double-counts an event, killed or not, and why a grade
   save on PostgreSQL never waits for it: rebuild_day's docstring). The day's last transaction
   records the progress.
3. The stale-day marks that existed at the start are deleted at the end (every day was rebuilt
   since); marks made meanwhile stay for the background pass.

The progress (phase and last day done) is stored in metric_rebuild_progress and committed with each
day, so a killed rebuild continues with the day after the last one finished (a day cut off midway
is read again: its committed steps left it consistent); a rebuild in another time zone than the
unfinished one starts over. Between two transactions the write lock is free: a grade save waits for
at most one of them, not for the rebuild or a whole day (benchmarks/bench_rebuild_grade.py, which
prints the longest hold; RebuildReport.hold_summary).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from webapp.core.db import session_scope, table_of
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc, utcnow
from webapp.metrics import watermark
from webapp.metrics.aggregates import chunks
from webapp.metrics.event_days import as_date
from webapp.metrics.models import DailyAggregate, Event, RebuildProgress, StaleDay
from webapp.metrics.rebuild_day import DayResult, rebuild_day

PROGRESS_ID = 1
# Events given a new day per write transaction in the "days" phase (each move rewrites the row and
# its four day-led index entries: about twice the work of marking an event merged, rebuild_day.MARK_BATCH).
RELABEL_BATCH = 2_000
# Called after each day: (phase, days done in the phase, days in the phase).
OnDay = Callable[[str, int, int], None]


@dataclass
class RebuildReport:
    """What a rebuild did: the days relabelled and rebuilt, the aggregate rows written, where it resumed from.

    `longest_hold` is, per phase and day, the longest write transaction (BEGIN to COMMIT, in seconds:
    how long a grade save could have waited for SQLite's write lock because of that day).
    """

    relabelled_events: int = 0
    days: int = 0
    rows: int = 0
    resumed: str = ""  # "" for a fresh start, else "<phase> after <day>"
    write_transactions: int = 0
    retries: int = 0  # days read again because another writer changed them meanwhile
    recomputed_in_lock: int = 0  # days recomputed inside one write transaction after ATTEMPTS reads
    longest_hold: dict[tuple[str, dt.date], float] = field(default_factory=dict)

    @contextlib.contextmanager
    def hold(self, phase: str, day: dt.date) -> Iterator[None]:
        """Time a write transaction of `day` in `phase` (wrap the session_scope)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._held(phase, day, time.perf_counter() - t0)

    def _held(self, phase: str, day: dt.date, seconds: float) -> None:
        self.write_transactions += 1
        key = (phase, day)
        self.longest_hold[key] = max(self.longest_hold.get(key, 0.0), seconds)

    def add_day(self, day: dt.date, done: DayResult) -> None:
        """Count one day of the figures phase."""
        self.days += 1
        self.rows += done.rows
        self.retries += done.retries
        self.recomputed_in_lock += int(done.recomputed_in_lock)
        for seconds in done.holds:
            self._held("figures", day, seconds)

    def hold_summary(self) -> str:
        """Say how long the write lock was held: the longest transaction, and each figures day's longest (median, p95)."""
        if not self.longest_hold:
            return "write lock held by no transaction"
        (phase, day), worst = max(self.longest_hold.items(), key=lambda kv: kv[1])
        figures = sorted(s for (p, _), s in self.longest_hold.items() if p == "figures")
        per_day = ""
        if figures:
            p95 = figures[min(len(figures) - 1, int(0.95 * len(figures)))]
            per_day = f"; a day's longest: median {statistics.median(figures) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms"
        return (
            f"write lock held at most {worst * 1000:.0f} ms ({phase} phase, {day}){per_day}; "
            f"{self.write_transactions} write transactions, {self.retries} days read again"
        )


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


def _figures_done(day: dt.date) -> Callable[[Session], None]:
    """Return what the day's last write transaction records: the figures phase is done through `day`."""

    def save(session: Session) -> None:
        _save_progress(session, "figures", day)

    return save


def _labels_after(engine: Engine, after: dt.date | None) -> list[dt.date]:
    e = table_of(Event).c
    stmt = select(e.day).distinct().order_by(e.day)
    if after is not None:
        stmt = stmt.where(e.day > after)
    with session_scope(engine, write=False) as session:
        return [as_date(d) for d in session.execute(stmt).scalars()]


def _relabel(engine: Engine, spec: EvalSpec, label: dt.date, report: RebuildReport) -> int:
    """Give the events labelled `label` their day in the spec's time zone; return how many moved.

    Read outside the write lock; the moves are written RELABEL_BATCH at a time, each batch its own
    transaction. Setting an event's day from its own time is idempotent, so a rebuild killed between
    two batches redoes the label (its progress is saved after the last batch) with the same result.
    """
    e = table_of(Event)
    tz = spec.tz
    with session_scope(engine, write=False) as session:
        first, last = session.execute(select(func.min(e.c.occurred_at), func.max(e.c.occurred_at)).where(e.c.day == label)).one()
        if first is None or (as_utc(first).astimezone(tz).date() == label and as_utc(last).astimezone(tz).date() == label):
            return 0
        rows = session.execute(select(e.c.id, e.c.occurred_at).where(e.c.day == label)).all()
    moves = [{"b_id": r[0], "b_day": d} for r in rows if (d := as_utc(r[1]).astimezone(tz).date()) != label]
    for chunk in chunks(moves, RELABEL_BATCH):
        with report.hold("days", label), session_scope(engine) as session:
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


def rebuild_by_day(
    *, engine: Engine, spec: EvalSpec, restart: bool = False, on_day: OnDay | None = None, batch: int | None = None
) -> RebuildReport:
    """Recompute every event's day and every day's figures in short transactions; continue an unfinished rebuild.

    `batch`: pending events marked merged per write transaction (rebuild_day.MARK_BATCH by default).
    """
    progress = _start(engine, spec, restart=restart)
    report = RebuildReport(resumed=f"{progress.phase} after {progress.done_through}" if progress.done_through else "")
    if progress.phase == "days":
        labels = _labels_after(engine, progress.done_through)
        for i, label in enumerate(labels, 1):
            report.relabelled_events += _relabel(engine, spec, label, report)
            with report.hold("days", label), session_scope(engine) as session:
                _save_progress(session, "days", label)
            if on_day:
                on_day("days", i, len(labels))
        with session_scope(engine) as session:
            _save_progress(session, "figures", None)
        progress.done_through = None
    days = _figure_days(engine, progress.done_through)
    for i, day in enumerate(days, 1):
        report.add_day(day, rebuild_day(engine, spec, day, on_done=_figures_done(day), batch=batch))
        if on_day:
            on_day("figures", i, len(days))
    with session_scope(engine) as session:
        s = table_of(StaleDay)
        session.execute(delete(s).where(s.c.id <= progress.marks_upto))
        session.execute(delete(table_of(RebuildProgress)).where(table_of(RebuildProgress).c.id == PROGRESS_ID))
    return report
