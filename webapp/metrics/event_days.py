"""The days with events that readers evaluate: the first and the last, within the sane window."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select
from sqlmodel import Session, col

from webapp.core.timeutil import utcnow
from webapp.metrics.event_input import WINDOW_START
from webapp.metrics.models import Event

# The first day an event in the sane window can fall on, in any time zone.
READ_FIRST_DAY = WINDOW_START.date() - dt.timedelta(days=1)

# Readers (the metrics page, the alerts, the alert pass) evaluate from the first day with events to
# the last: at most this many days back from the last, so that a history of any length stays within
# daily_metrics' ten-year range.
READ_HISTORY_DAYS = 3650


def event_days(session: Session) -> tuple[dt.date, dt.date] | None:
    """Return the first and last day with events that readers evaluate, or None.

    Only days in the sane window count (from 2000 to two days after today's UTC date, the furthest
    a day can be ahead in any time zone when events may be a day ahead) and at most
    READ_HISTORY_DAYS before the last: a stored row outside it (written before the window was
    enforced, or by hand) never drags every reader's range out of bounds (issue 33).
    """
    e = col(Event.day)
    lowest = READ_FIRST_DAY
    highest = utcnow().date() + dt.timedelta(days=2)
    # two queries: SQLite answers a lone min() or max() from the index, but not both in one
    last = session.execute(select(func.max(e)).where(e >= lowest, e <= highest)).scalar_one()
    if last is None:
        return None
    last = as_date(last)
    first = session.execute(select(func.min(e)).where(e >= max(lowest, last - dt.timedelta(days=READ_HISTORY_DAYS)))).scalar_one()
    return as_date(first), last


def as_date(value: dt.date | str) -> dt.date:
    """Return a day read from the database (SQLite hands back ISO text)."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)
