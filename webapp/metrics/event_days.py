"""The days with events that readers evaluate: the first and the last, within the sane window."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select
from sqlalchemy.orm import Mapped
from sqlmodel import Session, col

from webapp.core.timeutil import utcnow
from webapp.metrics.event_input import WINDOW_START
from webapp.metrics.models import DailyAggregate, Event

# The first day an event in the sane window can fall on, in any time zone.
READ_FIRST_DAY = WINDOW_START.date() - dt.timedelta(days=1)

# Readers (the metrics page, the alerts, the alert pass) evaluate from the first day with events to
# the last: at most this many days back from the last, so that a history of any length stays within
# daily_metrics' ten-year range.
READ_HISTORY_DAYS = 3650


def event_days(session: Session) -> tuple[dt.date, dt.date] | None:
    """Return the first and last day with events or kept figures that readers evaluate, or None.

    Only days in the sane window count (from 2000 to two days after today's UTC date, the furthest
    a day can be ahead in any time zone when events may be a day ahead) and at most
    READ_HISTORY_DAYS before the last: a stored row outside it (written before the window was
    enforced, or by hand) never drags every reader's range out of bounds (issue 33).
    A day whose events retention removed keeps its stored figures (watermark.py), so the days of
    the stored figures count too: /metrics' default range starts at the oldest kept figure, not at
    the oldest event left (issue 41).
    """
    lowest = READ_FIRST_DAY
    highest = utcnow().date() + dt.timedelta(days=2)
    lasts = [_edge(session, c, lowest, highest, last=True) for c in (col(Event.day), col(DailyAggregate.day))]
    if all(v is None for v in lasts):
        return None
    last = max(v for v in lasts if v is not None)
    floor = max(lowest, last - dt.timedelta(days=READ_HISTORY_DAYS))
    firsts = [_edge(session, c, floor, last, last=False) for c in (col(Event.day), col(DailyAggregate.day))]
    return min(v for v in firsts if v is not None), last


def _edge(session: Session, column: Mapped[dt.date], low: dt.date, high: dt.date, *, last: bool) -> dt.date | None:
    """Return the last (or first) day of a day column within [low, high]: one query (SQLite answers a lone max() from the index)."""
    edge = func.max(column) if last else func.min(column)
    value = session.execute(select(edge).where(column >= low, column <= high)).scalar_one()
    return None if value is None else as_date(value)


def as_date(value: dt.date | str) -> dt.date:
    """Return a day read from the database (SQLite hands back ISO text)."""
    return value if isinstance(value, dt.date) else dt.date.fromisoformat(value)
