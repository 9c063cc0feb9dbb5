"""Issue 41 item 4: `metrics rebuild` marks a day's pending events merged a batch per short write transaction, every
commit leaves the day's figures exact, and the result equals a one-shot aggregation computed here with pandas."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine, make_url
from sqlmodel import Session

from tests.metrics.conftest import ev, load, settle
from tests.metrics.test_rebuild_by_day import DAYS, Killed, _events, _reference, _rows
from webapp.auth import service as auth_service
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import ingest, rebuild_day
from webapp.metrics.event_days import as_date
from webapp.metrics.models import ALL, DailyAggregate, Event, RebuildProgress
from webapp.metrics.rebuild import rebuild_by_day

BATCH = 3  # ~20 events a day: about seven write transactions per day


def _one_shot(session: Session, spec: EvalSpec, *, merged_only: bool = False) -> dict[tuple[dt.date, str], dict[str, Any]]:
    """Aggregate the stored events per day and per (day, intent) with a plain pandas groupby, from the table itself."""
    e = table_of(Event).c
    stmt = select(e.day, e.intent, e.draft_shown, e.action, e.sent_text, e.edit_distance, e.escalated, e.latency_ms, e.pending)
    df = pd.DataFrame([tuple(r) for r in session.execute(stmt)],
                      columns=["day", "intent", "shown", "action", "sent", "ed", "escalated", "latency_ms", "pending"])
    if merged_only:
        df = df[~df["pending"].astype(bool)]
    df["day"] = df["day"].map(as_date)
    shown = df["shown"].astype(bool)
    ed = pd.to_numeric(df["ed"], errors="coerce")
    df["accept"] = shown & ((df["action"] == "accept") | ((df["action"] == "edit") & (ed <= spec.online_metrics.minor_edit_limit)))
    df["reject"] = shown & (df["action"] == "reject")
    ed_ok = shown & df["action"].isin(["accept", "edit"]) & df["sent"].notna() & ed.notna()
    df["ed_sum"] = ed.where(ed_ok, 0.0)
    df["ed_n"] = ed_ok.astype(int)
    df["esc"] = df["escalated"].astype(bool).astype(int)
    df["lat"] = (pd.to_numeric(df["latency_ms"], errors="coerce") / 1000.0).where(shown)
    out: dict[tuple[dt.date, str], dict[str, Any]] = {}
    for keys in (["day"], ["day", "intent"]):
        for key, g in df.groupby(keys):
            day, intent = (key[0], ALL) if len(keys) == 1 else key
            lat = g["lat"].dropna().to_numpy(dtype=float)
            out[(day, intent)] = {
                "n_events": len(g), "n_shown": int(g["shown"].astype(bool).sum()), "n_accept": int(g["accept"].sum()),
                "n_reject": int(g["reject"].sum()), "ed_sum": round(float(g["ed_sum"].sum()), 9), "ed_n": int(g["ed_n"].sum()),
                "n_escalated": int(g["esc"].sum()), "lat_p95_s": round(float(np.percentile(lat, 95)), 9) if len(lat) else None,
            }
    return out


def _stored(session: Session) -> dict[tuple[dt.date, str], dict[str, Any]]:
    """The stored rows per day over every plan and agent (all intents, and each intent)."""
    t = table_of(DailyAggregate).c
    cols = ["n_events", "n_shown", "n_accept", "n_reject", "ed_sum", "ed_n", "n_escalated", "lat_p95_s"]
    stmt = select(t.day, t.intent, *[t[c] for c in cols]).where(t.plan == ALL, t.agent_id == ALL)
    out: dict[tuple[dt.date, str], dict[str, Any]] = {}
    for r in session.execute(stmt):
        values = dict(zip(cols, r[2:], strict=True))
        values = {k: round(v, 9) if isinstance(v, float) else v for k, v in values.items()}
        out[(as_date(r[0]), r[1])] = values
    return out


def _pending(session: Session, day: dt.date | None = None) -> int:
    e = table_of(Event).c
    stmt = select(func.count()).where(e.pending.is_(True))
    if day is not None:
        stmt = stmt.where(e.day == day)
    return int(session.execute(stmt).scalar_one())


def _wrap_write(monkeypatch: pytest.MonkeyPatch, before: Callable[[dt.date, int], None] | None = None,
                after: Callable[[dt.date, int], None] | None = None) -> list[dt.date]:
    """Run `before`/`after` around each step's write transaction (with the day and the call's number); return the days written."""
    original = rebuild_day._write
    calls: list[dt.date] = []

    def write(engine: Engine, day: dt.date, step: rebuild_day.Step, result: rebuild_day.DayResult, on_written: Any) -> bool:
        calls.append(day)
        if before:
            before(day, len(calls))
        done = original(engine, day, step, result, on_written)
        if after:
            after(day, len(calls))
        return done

    monkeypatch.setattr(rebuild_day, "_write", write)
    return calls


class TestSameAsOneShot:
    def test_pending_days_rebuilt_in_batches_equal_a_pandas_groupby_over_the_events(
        self, session: Session, engine: Engine, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        load(session, spec, _events(), rebuild=False)  # every event pending, as after a bulk load
        expected_rows, _ = _reference(session, spec)
        calls = _wrap_write(monkeypatch)
        report = rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        session.rollback()
        assert _stored(session) == _one_shot(session, spec)
        assert _rows(session) == expected_rows  # every segment, calibration and versions as the one-transaction rebuild
        assert _pending(session) == 0
        # several write transactions per day, each marking at most BATCH events
        assert len(calls) > 2 * len(DAYS) and report.write_transactions >= len(calls)
        assert {d for _, d in report.longest_hold} == set(DAYS)

    def test_merged_events_take_one_write_per_day(self, session: Session, engine: Engine, spec: EvalSpec,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        load(session, spec, _events())  # merged by the stale-day pass, as in steady state
        calls = _wrap_write(monkeypatch)
        rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        session.rollback()
        assert sorted(calls) == DAYS and _stored(session) == _one_shot(session, spec)


class TestEveryCommitExact:
    def test_each_step_leaves_the_figures_of_the_merged_events_and_a_kill_mid_day_resumes(
        self, session: Session, engine: Engine, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        load(session, spec, _events(), rebuild=False)
        expected_rows, _ = _reference(session, spec)
        checked: list[dt.date] = []

        def exact(day: dt.date, n: int) -> None:
            with Session(engine) as other:
                stored = {k: v for k, v in _stored(other).items() if k[0] == day}
                merged = {k: v for k, v in _one_shot(other, spec, merged_only=True).items() if k[0] == day}
                assert stored == merged
                checked.append(day)
            if checked.count(DAYS[1]) == 3:  # the second day, three of its batches done
                raise Killed

        _wrap_write(monkeypatch, after=exact)
        with pytest.raises(Killed):
            rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        session.rollback()
        progress = session.get(RebuildProgress, 1)
        assert progress is not None and progress.done_through == DAYS[0]
        e = table_of(Event).c
        day_events = session.execute(select(func.count()).where(e.day == DAYS[1])).scalar_one()
        assert day_events - _pending(session, DAYS[1]) == 3 * BATCH  # three batches merged, the rest waits
        monkeypatch.undo()
        report = rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        assert report.resumed == f"figures after {DAYS[0]}"
        assert _rows(session) == expected_rows and _pending(session) == 0


class TestConcurrentWriters:
    def test_an_event_arriving_during_the_day_stays_pending_and_is_merged_by_the_pass(
        self, session: Session, engine: Engine, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        load(session, spec, _events(), rebuild=False)
        arrived: list[str] = []

        def arrive(day: dt.date, n: int) -> None:
            if day == DAYS[1] and not arrived:
                with Session(engine) as other:
                    (item,) = ingest.ingest_events(session=other, spec=spec, items=[ev(DAYS[1], 9, action="reject")])
                    other.commit()
                arrived.append(item.status)

        _wrap_write(monkeypatch, before=arrive)
        report = rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        session.rollback()
        assert arrived == ["created"] and report.retries == 0
        assert _pending(session) == 1 and _pending(session, DAYS[1]) == 1
        assert _stored(session) == _one_shot(session, spec, merged_only=True)  # counted once it is merged, not before
        settle(session, spec)  # the background pass: its stale-day mark survived the rebuild
        session.commit()
        assert _pending(session) == 0 and _stored(session) == _one_shot(session, spec)

    def test_a_day_merged_by_another_writer_meanwhile_is_read_again(
        self, session: Session, engine: Engine, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        load(session, spec, _events(), rebuild=False)
        expected_rows, _ = _reference(session, spec)
        merged: list[int] = []

        def merge_meanwhile(day: dt.date, n: int) -> None:
            if day == DAYS[2] and not merged:
                with Session(engine) as other:
                    merged.append(_pending(other, DAYS[2]))
                    settle(other, spec)  # the background pass merges the stale days, this one among them
                    other.commit()

        _wrap_write(monkeypatch, before=merge_meanwhile)
        report = rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        session.rollback()
        assert merged and merged[0] > 0 and report.retries >= 1 and report.recomputed_in_lock == 0
        assert _rows(session) == expected_rows and _pending(session) == 0


class TestGradeSavesDoNotWait:
    def test_a_writer_elsewhere_gets_through_between_steps_on_sqlite_and_during_them_on_postgresql(
        self, session: Session, engine: Engine, spec: EvalSpec, db_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        load(session, spec, _events(), rebuild=False)
        session.commit()
        through: list[bool] = []
        sqlite = db_url.startswith("sqlite")

        def sqlite_lock_free(day: dt.date, n: int) -> None:
            conn = sqlite3.connect(make_url(db_url).database or "", timeout=0)  # no waiting: the lock is free or not
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.rollback()
                through.append(True)
            except sqlite3.OperationalError:
                through.append(False)
            finally:
                conn.close()

        original_mark = rebuild_day._mark_range

        def mark_then_write_elsewhere(s: Session, day: dt.date, lo: int, hi: int) -> int:
            marked = original_mark(s, day, lo, hi)  # the step's transaction now holds its rows' locks
            with Session(engine) as other:  # a user's write on another connection, which must not wait
                other.execute(text("SET LOCAL lock_timeout = '2s'"))
                auth_service.create_user(session=other, email=f"u{len(through)}@example.com", password="a-password-1234",
                                         roles=["labeler"], name="Grader")
                other.commit()
            through.append(True)
            return marked

        if sqlite:
            _wrap_write(monkeypatch, before=sqlite_lock_free)
        else:
            monkeypatch.setattr(rebuild_day, "_mark_range", mark_then_write_elsewhere)
        rebuild_by_day(engine=engine, spec=spec, batch=BATCH)
        assert len(through) > 2 * len(DAYS) and all(through)
