"""Migration 0016 on a database with data: merged events stay merged, days still marked stale are rebuilt whole."""

from __future__ import annotations

from sqlalchemy import text
from sqlmodel import Session, select

from tests.test_migrations import empty_db_url  # noqa: F401  (the fixture: an empty SQLite file or PostgreSQL database)
from webapp.core.db import make_engine
from webapp.core.migrations_runner import upgrade
from webapp.core.spec import EvalSpec
from webapp.metrics import stale
from webapp.metrics.models import ALL, DailyAggregate

EVENT = (
    "INSERT INTO metric_event (event_id, ticket_id, occurred_at, day, intent, draft_shown, action, escalated, received_at) "
    "VALUES (:id, :id, :at, :day, 'billing_charge', :t, 'accept', :f, :at)"
)
AGGREGATE = (
    "INSERT INTO metric_daily_aggregate (day, intent, plan, agent_id, n_events, n_shown, n_accept, n_reject, ed_sum, ed_n, "
    "n_escalated, ht_sum, ht_n, lat_n, cost_sum, cost_n, calib) VALUES (:day, '*', '*', '*', :n, :n, :n, 0, 0, 0, 0, 0, 0, 0, 0, 0, '[]')"
)


def test_marked_days_are_rebuilt_and_the_others_kept(empty_db_url: str, spec: EvalSpec) -> None:  # noqa: F811
    upgrade(empty_db_url, "0014_production_weekly")
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            flags = {"t": True, "f": False}
            for i, day in enumerate(["2026-11-01", "2026-11-02", "2026-11-02", "2026-11-02"]):
                conn.execute(text(EVENT), {"id": f"e{i}", "at": f"{day}T12:00:00+00:00", "day": day, **flags})
            # 1 Nov is up to date; 2 Nov's stored figures hold 1 of its 3 events and the day is marked stale
            conn.execute(text(AGGREGATE), {"day": "2026-11-01", "n": 1})
            conn.execute(text(AGGREGATE), {"day": "2026-11-02", "n": 1})
            conn.execute(text("INSERT INTO metric_stale_day (day) VALUES ('2026-11-02')"))
        upgrade(empty_db_url)
        with engine.connect() as conn:
            pending = conn.execute(text("SELECT day, count(*) FROM metric_event WHERE pending GROUP BY day")).all()
            assert [(str(d), n) for d, n in pending] == [("2026-11-02", 3)]
            days = conn.execute(text("SELECT day FROM metric_daily_aggregate")).scalars().all()
            assert [str(d) for d in days] == ["2026-11-01"]
            assert conn.execute(text("SELECT count(*) FROM metric_stale_day WHERE created_at IS NOT NULL")).scalar_one() == 1
        with Session(engine) as session:
            assert [str(d) for d in stale.rebuild_stale(session=session, spec=spec)] == ["2026-11-02"]
            session.commit()
            found = session.exec(
                select(DailyAggregate).where(DailyAggregate.intent == ALL, DailyAggregate.plan == ALL, DailyAggregate.agent_id == ALL)
            )
            rows = {str(r.day): r.n_events for r in found}
            assert rows == {"2026-11-01": 1, "2026-11-02": 3}
    finally:
        engine.dispose()


