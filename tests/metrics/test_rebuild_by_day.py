"""Issue 41 item 4: `metrics rebuild` works a day per short transaction, continues a killed rebuild where it stopped,
and gives exactly the figures of the one-transaction rebuild."""

from __future__ import annotations

import datetime as dt
import random
import sqlite3
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session
from typer.testing import CliRunner

from tests.metrics.conftest import ev, load
from webapp.app import cli
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates, daily
from webapp.metrics.models import DailyAggregate, Event, RebuildProgress, StaleDay
from webapp.metrics.rebuild import rebuild_by_day

DAYS = [dt.date(2026, 11, 2) + dt.timedelta(days=i) for i in range(6)]


def _events(n: int = 120) -> list[dict[str, Any]]:
    rng = random.Random(41)
    out = []
    for _ in range(n):
        shown = rng.random() > 0.1
        out.append(ev(rng.choice(DAYS), rng.randrange(24), intent=rng.choice(["billing_charge", "refund_request", "other"]),
                      plan=rng.choice(["free", "pro"]), agent_id=rng.choice(["a1", "a2", "a3"]), draft_shown=shown,
                      action=rng.choice(["accept", "edit", "reject"]) if shown else None,
                      sent_text=rng.choice(["Hello", "Hello there", "Hi, thanks for writing"]), latency_ms=rng.randrange(100, 5000),
                      confidence=round(rng.random(), 2), escalated=rng.random() < 0.1))
    return out


def _load(session: Session, spec: EvalSpec, events: list[dict[str, Any]], *, rebuild: bool = True) -> None:
    assert {r.status for r in load(session, spec, events, rebuild=rebuild)} == {"created"}


def _close(value: Any) -> Any:
    """A stored value with its floats rounded to 9 places: sums over a day or over a month differ in the last bit."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list | tuple):
        return [_close(v) for v in value]
    return value


def _select_rows(session: Session) -> list[Any]:
    t = table_of(DailyAggregate).c
    cols = [t.day, t.intent, t.plan, t.agent_id, t.n_events, t.n_shown, t.n_accept, t.n_reject, t.ed_sum, t.ed_n,
            t.n_escalated, t.lat_p95_s, t.calib, t.versions]
    return [_close(tuple(r)) for r in session.execute(select(*cols).order_by(t.day, t.intent, t.plan, t.agent_id))]


def _rows(session: Session) -> list[Any]:
    session.rollback()
    return _select_rows(session)


def _days_of_events(session: Session) -> dict[str, dt.date]:
    session.rollback()
    e = table_of(Event).c
    return {r[0]: aggregates.as_date(r[1]) for r in session.execute(select(e.event_id, e.day))}


def _reference(session: Session, spec: EvalSpec) -> tuple[list[Any], dict[str, dt.date]]:
    """The one-transaction rebuild's result (rolled back afterwards), to compare the day-by-day one with."""
    aggregates.rebuild_all(session=session, spec=spec)
    session.flush()
    rows = _select_rows(session)
    e = table_of(Event).c
    days = {r[0]: aggregates.as_date(r[1]) for r in session.execute(select(e.event_id, e.day))}
    session.rollback()
    return rows, days


class TestSameFiguresAsOneTransaction:
    def test_unchanged_spec(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _load(session, spec, _events())
        expected, _ = _reference(session, spec)
        table = table_of(DailyAggregate)
        session.execute(table.delete().where(table.c.day == DAYS[2]))  # a day's figures lost: rebuilt
        session.commit()
        report = rebuild_by_day(engine=engine, spec=spec)
        assert _rows(session) == expected and report.days == len(DAYS) and report.relabelled_events == 0
        assert session.get(RebuildProgress, 1) is None  # finished: no progress left behind

    def test_a_time_zone_change_moves_events_to_their_new_day(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _load(session, spec, _events())
        ny = spec.model_copy(update={"timezone": "America/New_York"})
        expected_rows, expected_days = _reference(session, ny)
        report = rebuild_by_day(engine=engine, spec=ny)
        assert _days_of_events(session) == expected_days and _rows(session) == expected_rows
        assert report.relabelled_events == sum(1 for d in expected_days.values() if d not in DAYS) + sum(
            1 for k, d in expected_days.items() if d in DAYS and d != _day_in_utc(session, k))
        # New York is 5 hours behind UTC in November: an event at 03:00 UTC belongs to the day before
        (d,) = daily.daily_metrics(session=session, spec=ny, start=DAYS[0] - dt.timedelta(days=1), end=DAYS[0] - dt.timedelta(days=1))
        assert d.events > 0

    def test_days_with_figures_but_no_events_lose_them(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _load(session, spec, _events(20))
        e = table_of(Event)
        session.execute(e.delete().where(e.c.day == DAYS[0]))
        session.commit()
        rebuild_by_day(engine=engine, spec=spec)
        assert DAYS[0] not in {r[0] for r in _rows(session)}


def _day_in_utc(session: Session, event_id: str) -> dt.date:
    e = table_of(Event).c
    occurred = session.execute(select(e.occurred_at).where(e.event_id == event_id)).scalar_one()
    return occurred.date()


class Killed(Exception):
    """Stands for the process being killed after a day's commit."""


class TestResumable:
    @pytest.mark.parametrize("phase", ["days", "figures"])
    def test_a_killed_rebuild_continues_where_it_stopped(self, session: Session, engine: Engine, spec: EvalSpec, phase: str) -> None:
        _load(session, spec, _events())
        ny = spec.model_copy(update={"timezone": "America/New_York"})
        expected_rows, expected_days = _reference(session, ny)
        seen: list[tuple[str, int]] = []

        def kill_after_three(p: str, done: int, total: int) -> None:
            seen.append((p, done))
            if p == phase and done == 3:
                raise Killed

        with pytest.raises(Killed):
            rebuild_by_day(engine=engine, spec=ny, on_day=kill_after_three)
        session.rollback()
        progress = session.get(RebuildProgress, 1)
        assert progress is not None and progress.phase == phase and progress.done_through is not None
        again: list[tuple[str, int, int]] = []
        report = rebuild_by_day(engine=engine, spec=ny, on_day=lambda p, d, t: again.append((p, d, t)))
        assert report.resumed == f"{phase} after {progress.done_through}"
        # only what was left is done again
        left = [x for x in again if x[0] == phase]
        assert left and left[0][1] == 1 and left[-1][2] == left[-1][1]
        assert _days_of_events(session) == expected_days and _rows(session) == expected_rows
        assert session.get(RebuildProgress, 1) is None

    def test_another_time_zone_starts_over(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _load(session, spec, _events(30))
        ny = spec.model_copy(update={"timezone": "America/New_York"})

        def kill(p: str, done: int, total: int) -> None:
            raise Killed

        with pytest.raises(Killed):
            rebuild_by_day(engine=engine, spec=ny, on_day=kill)
        expected_rows, _ = _reference(session, spec)
        report = rebuild_by_day(engine=engine, spec=spec)  # back to UTC: the unfinished New York rebuild is dropped
        assert report.resumed == "" and _rows(session) == expected_rows


class TestWriteLockBetweenDays:
    def test_sqlite_writers_get_the_lock_between_two_days(self, session: Session, engine: Engine, spec: EvalSpec, db_url: str) -> None:
        _load(session, spec, _events())
        session.commit()
        free: list[bool] = []

        def try_write(p: str, done: int, total: int) -> None:
            if not db_url.startswith("sqlite"):
                free.append(True)
                return
            conn = sqlite3.connect(make_url(db_url).database or "", timeout=0)  # no waiting: the lock is free or not
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
                free.append(True)
            except sqlite3.OperationalError:
                free.append(False)
            finally:
                conn.close()

        rebuild_by_day(engine=engine, spec=spec, on_day=try_write)
        assert free and all(free)

    def test_stale_marks_from_before_are_cleared_and_later_ones_kept(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _load(session, spec, _events(30), rebuild=False)
        assert session.execute(select(func.count()).select_from(StaleDay)).scalar_one() > 0
        session.commit()
        rebuild_by_day(engine=engine, spec=spec)
        session.rollback()
        assert session.execute(select(func.count()).select_from(StaleDay)).scalar_one() == 0
        pending = session.execute(select(func.count()).select_from(Event).where(table_of(Event).c.pending)).scalar_one()
        assert pending == 0


class TestCommand:
    def test_metrics_rebuild_reports_and_continues(self, session: Session, engine: Engine, spec: EvalSpec, db_url: str) -> None:
        _load(session, spec, _events(40))
        expected, _ = _reference(session, spec)
        out = CliRunner().invoke(cli.app, ["metrics", "rebuild", "--quiet"], env={"DRAFTDESK_DATABASE_URL": db_url})
        assert out.exit_code == 0, out.output
        assert f"over {len(DAYS)} days, 0 events given a new day" in out.output
        assert _rows(session) == expected
