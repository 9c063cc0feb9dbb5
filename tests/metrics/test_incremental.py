"""The rebuild pass merges only the new events (aggregates.merge_pending) and must equal a full recompute."""

from __future__ import annotations

import datetime as dt
import math
import random
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from tests.conftest import PG_URL
from tests.metrics.conftest import ev, load, settle
from webapp.core.db import make_engine, table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates, ingest, stale
from webapp.metrics.models import ALL, DailyAggregate, Event

D = dt.date.fromisoformat
INTENTS = ["billing_charge", "password_reset", "shipping_delay", None]
PLANS = ["free", "pro", None]
AGENTS = ["a1", "a2", "a3"]
EXACT = {"n_events", "n_shown", "n_accept", "n_reject", "ed_n", "n_escalated", "ht_n", "lat_n", "cost_n", "lat_p95_s"}
FLOAT_SUMS = {"ed_sum", "ht_sum", "cost_sum"}


def stored(session: Session) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Return every stored aggregate row by (day, intent, plan, agent)."""
    session.expire_all()
    rows = session.execute(select(DailyAggregate)).scalars().all()
    return {(str(r.day), r.intent, r.plan, r.agent_id): r.model_dump(exclude={"id"}) for r in rows}


def full_recompute(session: Session, spec: EvalSpec) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Recompute every day from all its events (the full path), in a transaction rolled back afterwards."""
    days = sorted(set(session.execute(select(col(Event.day)).distinct()).scalars()))
    aggregates.rebuild_days(session=session, spec=spec, days=[stale.as_date(d) for d in days])
    out = stored(session)
    session.rollback()
    return out


def assert_same(merged: dict[tuple[Any, ...], dict[str, Any]], full: dict[tuple[Any, ...], dict[str, Any]]) -> None:
    """Counts, bins, versions and p95 exactly; float sums up to their rounding (the order of addition differs)."""
    assert merged.keys() == full.keys()
    for key, m in merged.items():
        f = full[key]
        for name in EXACT:
            assert m[name] == f[name], (key, name, m[name], f[name])
        for name in FLOAT_SUMS:
            assert math.isclose(m[name], f[name], rel_tol=1e-12, abs_tol=1e-12), (key, name, m[name], f[name])
        assert m["versions"] == f["versions"], key
        assert len(m["calib"]) == len(f["calib"])
        for mb, fb in zip(m["calib"], f["calib"], strict=True):
            assert mb[0] == fb[0] and mb[2] == fb[2], key  # counts
            assert math.isclose(mb[1], fb[1], rel_tol=1e-12, abs_tol=1e-12), key  # sum of confidences


def random_event(rng: random.Random, day: dt.date) -> dict[str, Any]:
    action = rng.choice(["accept", "edit", "reject", None])
    shown = action is not None or rng.random() < 0.2
    fields: dict[str, Any] = {
        "intent": rng.choice(INTENTS),
        "plan": rng.choice(PLANS),
        "agent_id": rng.choice(AGENTS),
        "model_version": rng.choice(["m1", "m2"]),
        "draft_shown": shown,
        "action": action if shown else None,
        "escalated": rng.random() < 0.1,
    }
    if rng.random() < 0.9:
        fields["latency_ms"] = round(rng.uniform(200, 9000), 3)
    if rng.random() < 0.8:
        fields["handle_time_s"] = round(rng.uniform(30, 900), 2)
    if rng.random() < 0.7:
        fields["cost_usd"] = round(rng.uniform(0.001, 0.05), 5)
    if shown and rng.random() < 0.8:
        fields["confidence"] = round(rng.random(), 4)
    if action == "edit":
        fields["sent_text"] = rng.choice(["Hello there", "Hi", "Hello!"])
    elif action is None:
        fields["sent_text"] = None
    return ev(day, rng.randrange(0, 24), **fields)


class TestMergeEqualsFullRecompute:
    def test_random_batches_late_days_and_retries_merge_to_the_full_recompute(self, session: Session, spec: EvalSpec) -> None:
        rng = random.Random(33)
        days = [D("2026-11-01") + dt.timedelta(days=i) for i in range(4)]
        sent: list[dict[str, Any]] = []
        for batch in range(12):
            # mostly the last day (today), with late events for earlier days, out of order
            events = [random_event(rng, days[-1] if rng.random() < 0.6 else rng.choice(days)) for _ in range(rng.randrange(1, 40))]
            # a retried batch: events already stored come again and must not be counted twice
            retried = rng.sample(sent, min(len(sent), 5)) if sent and batch % 3 == 2 else []
            results = load(session, spec, events + retried)
            assert [r.status for r in results] == ["created"] * len(events) + ["duplicate"] * len(retried)
            sent += events
            assert_same(stored(session), full_recompute(session, spec))
        n = session.execute(select(func.count()).select_from(Event)).scalar_one()
        assert n == len(sent)
        assert sum(r["n_events"] for k, r in stored(session).items() if k[1:] == (ALL, ALL, ALL)) == len(sent)

    def test_a_small_day_by_hand(self, session: Session, spec: EvalSpec) -> None:
        # three events, then two more and a retry of the first: every figure worked out by hand
        first = [
            ev("2026-11-02", intent="billing_charge", latency_ms=1000, cost_usd=0.01, handle_time_s=100),
            ev("2026-11-02", intent="billing_charge", action="reject", latency_ms=3000, cost_usd=0.03),
            ev("2026-11-02", intent="plan_change", latency_ms=2000, escalated=True),
        ]
        load(session, spec, first)
        later = [
            ev("2026-11-02", intent="plan_change", latency_ms=5000, handle_time_s=300),
            ev("2026-11-02", intent="billing_charge", draft_shown=False, action=None, sent_text=None),
        ]
        load(session, spec, [*later, first[0]])
        rows = stored(session)
        day = rows[("2026-11-02", ALL, ALL, ALL)]
        assert (day["n_events"], day["n_shown"], day["n_accept"], day["n_reject"], day["n_escalated"]) == (5, 4, 3, 1, 1)
        assert (day["ht_sum"], day["ht_n"], day["cost_n"], day["lat_n"]) == (400.0, 2, 2, 4)
        assert math.isclose(day["cost_sum"], 0.04)
        # shown latencies 1, 3, 2, 5 s: numpy's linear p95 of [1, 2, 3, 5] = 3 + 0.85 * 2 = 4.7
        assert day["lat_p95_s"] == float(np.percentile([1.0, 3.0, 2.0, 5.0], 95)) and math.isclose(day["lat_p95_s"], 4.7)
        billing = rows[("2026-11-02", "billing_charge", ALL, ALL)]
        assert (billing["n_events"], billing["n_shown"], billing["lat_n"]) == (3, 2, 2)
        assert billing["lat_p95_s"] == float(np.percentile([1.0, 3.0], 95))  # 2.9, untouched by the later batch's p95
        reset = rows[("2026-11-02", "plan_change", ALL, ALL)]
        assert reset["lat_p95_s"] == float(np.percentile([2.0, 5.0], 95))  # 4.85: recomputed after the merge
        assert_same(rows, full_recompute(session, spec))

    def test_the_merge_reads_the_new_events_and_marks_them_merged(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02") for _ in range(5)])
        e = table_of(Event).c
        assert session.execute(select(func.count()).where(e.pending)).scalar_one() == 0
        load(session, spec, [ev("2026-11-02"), ev("2026-11-03")], rebuild=False)
        assert session.execute(select(func.count()).where(e.pending)).scalar_one() == 2
        assert len(aggregates.raw_frame(session, days=[D("2026-11-02")], pending_only=True)) == 1
        assert stale.rebuild_stale(session=session, spec=spec) == [D("2026-11-02"), D("2026-11-03")]
        assert session.execute(select(func.count()).where(e.pending)).scalar_one() == 0
        # a second pass finds nothing to do and changes nothing
        before = stored(session)
        assert aggregates.merge_pending(session=session, spec=spec, days=[D("2026-11-02")]) == []
        assert stored(session) == before
        assert before[("2026-11-02", ALL, ALL, ALL)]["n_events"] == 6


class TestFullRecomputeMarksWhatItRead:
    def test_the_import_path_marks_its_events_merged_so_the_next_pass_adds_nothing_twice(
        self, session: Session, spec: EvalSpec
    ) -> None:
        # as `draftdesk import events`: stored events (pending) aggregated from the rows in memory
        load(session, spec, [ev("2026-11-02") for _ in range(4)], rebuild=False)
        frame = aggregates.raw_frame(session, days=[D("2026-11-02")])
        assert aggregates.rebuild_days(session=session, spec=spec, days=[D("2026-11-02")], frame=frame) > 0
        e = table_of(Event).c
        assert session.execute(select(func.count()).where(e.pending)).scalar_one() == 0
        load(session, spec, [ev("2026-11-02")])  # a later batch, merged by the pass
        assert stored(session)[("2026-11-02", ALL, ALL, ALL)]["n_events"] == 5
        assert_same(stored(session), full_recompute(session, spec))

    def test_a_frame_that_is_not_every_event_of_its_days_is_read_back(self, session: Session, spec: EvalSpec) -> None:
        load(session, spec, [ev("2026-11-02") for _ in range(3)])
        load(session, spec, [ev("2026-11-02"), ev("2026-11-02")], rebuild=False)
        partial = aggregates.raw_frame(session, days=[D("2026-11-02")], pending_only=True)
        aggregates.rebuild_days(session=session, spec=spec, days=[D("2026-11-02")], frame=partial)
        assert stored(session)[("2026-11-02", ALL, ALL, ALL)]["n_events"] == 5
        # the marks' pass finds nothing pending: the day is not counted again
        assert stale.rebuild_stale(session=session, spec=spec) == [D("2026-11-02")]
        assert stored(session)[("2026-11-02", ALL, ALL, ALL)]["n_events"] == 5


if PG_URL:  # on SQLite a rebuild holds the only write lock: no batch commits during it

    @pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
    def test_a_batch_committed_during_the_merge_stays_out_of_its_sums_and_its_p95(
        db_url: str, engine: Engine, session: Session, spec: EvalSpec
    ) -> None:
        load(session, spec, [ev("2026-11-02", latency_ms=1000), ev("2026-11-02", latency_ms=2000)])
        load(session, spec, [ev("2026-11-02", latency_ms=3000)], rebuild=False)
        committed: list[str] = []

        @event.listens_for(engine, "before_cursor_execute")
        def _meanwhile(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
            # just before the p95's read, another batch commits an outlier for the same day
            if "latency_ms" in statement and "has_sent" not in statement and not committed:
                committed.append(statement)
                other_engine = make_engine(db_url)
                with Session(other_engine) as other:
                    ingest.ingest_events(session=other, spec=spec, items=[ev("2026-11-02", latency_ms=900_000)])
                    other.commit()
                other_engine.dispose()

        try:
            assert stale.rebuild_stale(session=session, spec=spec) == [D("2026-11-02")]
            session.commit()
        finally:
            event.remove(engine, "before_cursor_execute", _meanwhile)
        assert committed
        day = stored(session)[("2026-11-02", ALL, ALL, ALL)]
        assert (day["n_events"], day["lat_n"]) == (3, 3)
        assert day["lat_p95_s"] == float(np.percentile([1.0, 2.0, 3.0], 95))  # not the 900 s outlier
        settle(session, spec)  # the next pass takes the outlier in
        session.commit()
        day = stored(session)[("2026-11-02", ALL, ALL, ALL)]
        assert day["n_events"] == 4 and day["lat_p95_s"] == float(np.percentile([1.0, 2.0, 3.0, 900.0], 95))
