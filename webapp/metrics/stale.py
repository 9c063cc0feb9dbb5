"""Stale days: aggregates rebuilt lazily after ingestion, many batches at once.

Ingestion inserts the events and one StaleDay mark per touched day in the same transaction, and
nothing else, so a batch costs its insert. The day's aggregate rows are rebuilt later, many days
and batches at once: by `serve`'s background rebuilder (webapp/metrics/background.py, every
REBUILD_INTERVAL_S), the import command and `draftdesk metrics rebuild`; without background jobs
(tests, scripts) the ingesting request rebuilds them itself (after_ingest).

Decision (issue 26): readers show the stored aggregates, so a day with new events shows the
figures of its last rebuild until the next one (at most REBUILD_INTERVAL_S plus the pass behind),
and the metrics page says which days are updating. Reading the stale days from their raw events
instead made every /metrics visit read all of today's events (12,000 rows: +350 ms a visit under
200 events/s; 50,000 at the end of a busy day), which dashboards like Grafana or Langfuse do not
do either: they lag ingestion by seconds.

Why this is exact under concurrency (PostgreSQL, READ COMMITTED; SQLite has one writer at a time):
- A mark commits atomically with its events, so an event is either behind a mark or already in
  the stored aggregate.
- A rebuild reads the marks first, then (under the day's advisory lock, so rebuilds of one day run
  one after the other) the days' pending events, merges them and marks them merged, and deletes
  exactly the marks it read: every event behind those marks was committed before the pending
  read. A mark committed later survives, and its day is merged again (its events, if that read
  already took them, are no longer pending: nothing is counted twice).

Issue 33: the rebuild merges the new events into the stored rows (aggregates.merge_pending), so
its cost follows the events that arrived since the last pass, not the size of their days; readers
flag the days whose figures lag (daily.lagging_days, from the marks' created_at).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, cast

import pandas as pd
from sqlalchemy import delete, func, select, text
from sqlmodel import Session, col

from webapp.core.facts import record_fact
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import as_utc
from webapp.metrics import aggregates
from webapp.metrics.models import StaleDay

if TYPE_CHECKING:  # daily reads this module
    from webapp.metrics.daily import DaySums

# Days rebuilt per transaction by rebuild_stale: bounds the memory and the time the day locks are held.
REBUILD_CHUNK_DAYS = 31
# Key of the PostgreSQL advisory lock that lets one background rebuilder work at a time (the
# others skip the pass instead of queueing behind the same days' locks and redoing the work).
PG_REBUILDER_LOCK_KEY = 7_305_502


def stale_days(session: Session, *, start: dt.date | None = None, end: dt.date | None = None) -> set[dt.date]:
    """Return the days (within [start, end] when given) whose stored aggregates may lag their events."""
    stmt = select(col(StaleDay.day)).distinct()
    if start is not None:
        stmt = stmt.where(col(StaleDay.day) >= start)
    if end is not None:
        stmt = stmt.where(col(StaleDay.day) <= end)
    return {as_date(d) for d in session.execute(stmt).scalars()}


def updating_since(session: Session, *, start: dt.date | None = None, end: dt.date | None = None) -> dict[dt.date, dt.datetime]:
    """Return the days (within [start, end] when given) whose stored aggregates may lag, each with its oldest mark's time."""
    stmt = select(col(StaleDay.day), func.min(col(StaleDay.created_at))).group_by(col(StaleDay.day))
    if start is not None:
        stmt = stmt.where(col(StaleDay.day) >= start)
    if end is not None:
        stmt = stmt.where(col(StaleDay.day) <= end)
    return {as_date(d): _as_datetime(t) for d, t in session.execute(stmt)}


def _as_datetime(value: dt.datetime | str) -> dt.datetime:
    # SQLite hands back an aggregate's timestamp as text (min() loses the column's type)
    return as_utc(value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value))


def as_date(value: dt.date | str) -> dt.date:
    """Return a day as a date (SQLite hands back ISO text where a query loses the column's type)."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


def frame_rows(df: pd.DataFrame, spec: EvalSpec) -> list[DaySums]:
    """Aggregate raw events per day over every value of each dimension, as the stored rows read."""
    agg = aggregates.aggregate_frame(df, spec, ())
    rows: list[dict[str, object]] = [{str(k): v for k, v in r.items()} for r in agg.to_dict("records")]
    for r in rows:
        r["versions"] = None
        if r["lat_p95_s"] != r["lat_p95_s"]:  # NaN: no latency that day
            r["lat_p95_s"] = None
    # aggregate_frame's columns are the stored rows' sums
    return [cast("DaySums", r) for r in rows]


def days_to_rebuild(marked: set[dt.date], *, max_days: int | None = None) -> list[dt.date]:
    """Choose which marked days this call brings up to date: the oldest first, a chunk at a time.

    The one place the rebuild's days are chosen (a guard on which days may be rewritten belongs here).
    """
    return sorted(marked)[: max_days or REBUILD_CHUNK_DAYS]


def rebuild_stale(
    *, session: Session, spec: EvalSpec, max_days: int | None = None, marked_upto: int | None = None
) -> list[dt.date]:
    """Merge the new events of stale days (a chunk of days per call) into their aggregates and clear their marks; return the days.

    The cost follows the new events (aggregates.merge_pending), not the size of their days.
    `marked_upto` (a mark id, see last_mark) limits the call to the marks made up to it: the
    background pass rebuilds what was stale when it began, not what arrives while it runs.
    """
    days, marks = marks_to_rebuild(session, marked_upto=marked_upto, max_days=max_days)
    if not days:
        return []
    aggregates.merge_pending(session=session, spec=spec, days=days)
    clear_marks(session, marks)
    return days


# A stale-day mark as a rebuild reads it: (id, day, created_at); the time tells a mark from a later one given its id.
Mark = tuple[int, dt.date, dt.datetime]


def marks_to_rebuild(
    session: Session, *, marked_upto: int | None = None, max_days: int | None = None
) -> tuple[list[dt.date], list[Mark]]:
    """Return the days a rebuild call brings up to date (days_to_rebuild) and the marks of those days it clears."""
    stmt = select(col(StaleDay.id), col(StaleDay.day), col(StaleDay.created_at)).order_by(col(StaleDay.day), col(StaleDay.id))
    if marked_upto is not None:
        stmt = stmt.where(col(StaleDay.id) <= marked_upto)
    marks = [(int(i), as_date(d), _as_datetime(t)) for i, d, t in session.execute(stmt)]
    if not marks:
        return [], []
    days = days_to_rebuild({d for _, d, _ in marks}, max_days=max_days)
    chosen = set(days)
    return days, [m for m in marks if m[1] in chosen]


def clear_marks(session: Session, marks: list[Mark]) -> None:
    """Delete the marks a rebuild has brought up to date (every event behind them is merged)."""
    for chunk in aggregates.chunks([m[0] for m in marks], 1000):
        session.execute(delete(StaleDay).where(col(StaleDay.id).in_(chunk)))
    session.flush()


def last_mark(session: Session) -> int | None:
    """Return the id of the newest stale-day mark, or None: no day is stale."""
    return session.execute(select(func.max(col(StaleDay.id)))).scalar_one_or_none()


def try_rebuilder_lock(session: Session) -> bool:
    """Take the one-rebuilder-at-a-time lock for this transaction on PostgreSQL; False when another process has it."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    return bool(session.execute(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": PG_REBUILDER_LOCK_KEY}).scalar())


def after_ingest(*, session: Session, spec: EvalSpec, background: bool) -> None:
    """Rebuild stale days in this transaction and record "metrics_rebuilt", unless a background rebuilder will.

    With background jobs (`draftdesk serve`), a batch stops at its insert and stale-day marks: the
    rebuilder (webapp/metrics/background.py) coalesces the rebuilds of many batches and records the
    fact right after (within REBUILD_INTERVAL_S). Without one (tests, scripts, `serve --no-background`),
    nothing else would rebuild, so the request does it; the alerts domain reacts to the fact either way.
    Decision: the stale-day marks are the fact "events ingested for day D" (one per day, however many
    batches), and the rebuilder its reaction: a reaction per batch would rebuild a day 200 times a second.
    """
    if background:
        return
    while rebuild_stale(session=session, spec=spec):
        pass
    record_fact(session, "metrics_rebuilt")
