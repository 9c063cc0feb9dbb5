"""fetch_rows binds every filter through SQLAlchemy: a datetime filter counts the rows it matches
(binding by hand sent SQLite `2026-11-02T12:00:00+00:00` against its stored `2026-11-02 12:00:00...`
text, and every row compared as earlier: 0 rows)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlmodel import Session, col

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics.driver_rows import fetch_rows
from webapp.metrics.models import Event


class TestFetchRows:
    def test_datetime_filter_counts_the_matching_rows(self, session: Session, spec: EvalSpec) -> None:
        # three events at 10:00, 12:00 and 14:00 UTC on one day: at or after noon are two
        load(session, spec, [ev("2026-11-02", hour=h, event_id=f"dt{h}") for h in (10, 12, 14)], rebuild=False)
        noon = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
        stmt = select(col(Event.event_id)).where(col(Event.occurred_at) >= noon).order_by(col(Event.event_id))
        assert [tuple(r) for r in fetch_rows(session, stmt)] == [("dt12",), ("dt14",)]

    def test_date_and_in_filters(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev(d, event_id=f"d{d}") for d in ("2026-11-01", "2026-11-02", "2026-11-03")], rebuild=False)
        days = [dt.date(2026, 11, 1), dt.date(2026, 11, 3)]
        stmt = select(col(Event.event_id)).where(col(Event.day).in_(days)).order_by(col(Event.event_id))
        assert [tuple(r) for r in fetch_rows(session, stmt)] == [("d2026-11-01",), ("d2026-11-03",)]
