"""The retention watermark `pruned_before`: days before it are final (issue 33).

With DRAFTDESK_EVENT_RETENTION_DAYS set, the prune (webapp/ops/retention.py) deletes the events of
whole days before a cut-off day, but keeps those days' stored daily figures (the gates, the trends
and the alerts read them). Rebuilding such a day from the events that remain would replace its
figures with those of a handful of kept events (or erase them), and a late event for it would
rewrite it from one row. So the prune first moves the watermark to its cut-off day (committed
before it deletes anything), and from then on:

- no rebuild touches a day before the watermark (`days_open_to_rebuild`, at the entry of
  aggregates.rebuild_days and of rebuild_all);
- an event whose day is before it is refused at ingestion, per event (webapp/metrics/event_input.py).

The watermark only moves forward (`advance_pruned_before` keeps the later of the stored and the new
day), so lengthening the retention afterwards does not reopen days that have lost events.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlmodel import Session

from webapp.core.db import table_of
from webapp.core.timeutil import utcnow
from webapp.metrics.models import RetentionWatermark

# The watermark table holds one row, with this id.
WATERMARK_ID = 1


def _as_date(value: dt.date | str) -> dt.date:
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)


def pruned_before(session: Session) -> dt.date | None:
    """Return the retention watermark (events of days before it may have been pruned), or None: nothing pruned."""
    t = table_of(RetentionWatermark).c
    value = session.execute(select(t.pruned_before).where(t.id == WATERMARK_ID)).scalar_one_or_none()
    return None if value is None else _as_date(value)


def advance_pruned_before(*, session: Session, day: dt.date, now: dt.datetime | None = None) -> dt.date:
    """Move the watermark forward to `day` (never back) in one statement, race-free; return the stored watermark.

    `updated_at` records the prune (`now`): a pruned day's drill-down says its events were gone by then.
    """
    table = table_of(RetentionWatermark)
    values = {"id": WATERMARK_ID, "pruned_before": day, "updated_at": now or utcnow()}
    if session.get_bind().dialect.name == "postgresql":
        stmt = pg_insert(table).values(values)
        later = func.greatest(table.c.pruned_before, stmt.excluded.pruned_before)
    else:
        stmt = sqlite_insert(table).values(values)
        # SQLite stores days as ISO text, whose order is the days' order; max() of two values is scalar
        later = func.max(table.c.pruned_before, stmt.excluded.pruned_before)
    upsert = stmt.on_conflict_do_update(
        index_elements=[table.c.id], set_={"pruned_before": later, "updated_at": stmt.excluded.updated_at}
    )
    session.execute(upsert)
    session.flush()
    stored = pruned_before(session)
    if stored is None:  # pragma: no cover - the upsert above wrote the row
        raise RuntimeError("the retention watermark was not stored")
    return stored


def days_open_to_rebuild(session: Session, days: Iterable[dt.date]) -> list[dt.date]:
    """Return the given days (sorted, once each) that a rebuild may touch: those on or after the watermark."""
    floor = pruned_before(session)
    unique = sorted(set(days))
    return unique if floor is None else [d for d in unique if d >= floor]
