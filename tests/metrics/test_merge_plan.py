"""The background pass's merge computed from a read snapshot on SQLite (webapp/metrics/merge_plan.py).

What must hold: the figures equal a full recompute whatever commits meanwhile; SQLite's write lock is
free while the merge is computed; a plan whose snapshot changed before its write is dropped, and the
call merges in its write transaction instead.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from tests.metrics.conftest import ev, load
from tests.metrics.test_incremental import assert_same, full_recompute, random_event, stored
from webapp.core.db import session_scope
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates, ingest, merge_plan, stale
from webapp.metrics.models import ALL, Event, StaleDay

D = dt.date.fromisoformat
DAYS = [D("2026-11-01") + dt.timedelta(days=i) for i in range(3)]


def planned_pass(engine: Engine, spec: EvalSpec) -> list[dt.date]:
    """One background pass's rebuild calls, as webapp.metrics.background.rebuild_pass runs them."""
    done: list[dt.date] = []
    with Session(engine) as session:
        upto = stale.last_mark(session)
    if upto is None:
        return done
    while days := merge_plan.rebuild_stale_planned(engine=engine, spec=spec, marked_upto=upto):
        done += days
    return done


def pending(session: Session) -> int:
    session.expire_all()
    return int(session.execute(select(func.count()).where(col(Event.pending).is_(True))).scalar_one())


def test_planned_passes_give_the_full_recompute(engine: Engine, session: Session, spec: EvalSpec) -> None:
    """Random batches (late days, retries), a pass after each: every figure equals a recompute from all the events."""
    rng = random.Random(42)
    sent: list[dict[str, Any]] = []
    for batch in range(8):
        events = [random_event(rng, DAYS[-1] if rng.random() < 0.6 else rng.choice(DAYS)) for _ in range(rng.randrange(1, 30))]
        retried = rng.sample(sent, min(len(sent), 4)) if sent and batch % 3 == 2 else []
        load(session, spec, events + retried, rebuild=False)
        sent += events
        assert planned_pass(engine, spec)
        assert pending(session) == 0
        assert_same(stored(session), full_recompute(session, spec))
    assert sum(r["n_events"] for k, r in stored(session).items() if k[1:] == (ALL, ALL, ALL)) == len(sent)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_write_lock_is_free_while_the_merge_is_computed_and_a_batch_committed_then_waits_for_the_next_pass(
    engine: Engine, session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    load(session, spec, [ev("2026-11-02", latency_ms=1000), ev("2026-11-02", latency_ms=2000)])
    load(session, spec, [ev("2026-11-02", latency_ms=3000)], rebuild=False)
    seen: list[bool] = []
    real_p95 = aggregates.latency_p95

    def p95_while_a_batch_commits(s: Session, days: Sequence[dt.date], *, with_pending: bool = False) -> dict[Any, float]:
        if with_pending and not seen:  # the plan's read, in the snapshot
            # an events batch takes the write lock and commits an outlier for the same day meanwhile
            with session_scope(engine) as other:
                ingest.ingest_events(session=other, spec=spec, items=[ev("2026-11-02", latency_ms=900_000)])
            seen.append(True)
        return real_p95(s, days, with_pending=with_pending)

    monkeypatch.setattr(aggregates, "latency_p95", p95_while_a_batch_commits)
    with Session(engine) as s:
        upto = stale.last_mark(s)
    assert upto is not None
    assert merge_plan.rebuild_stale_planned(engine=engine, spec=spec, marked_upto=upto) == [D("2026-11-02")]
    assert seen == [True]
    day = stored(session)[("2026-11-02", ALL, ALL, ALL)]
    # the snapshot's three events, not the outlier committed after it: p95 of [1, 2, 3] s = 2.9
    assert (day["n_events"], day["lat_p95_s"]) == (3, pytest.approx(2.9))
    assert pending(session) == 1
    assert session.execute(select(func.count()).where(col(StaleDay.id) > upto)).scalar_one() == 1  # its mark stays
    monkeypatch.setattr(aggregates, "latency_p95", real_p95)
    assert planned_pass(engine, spec) == [D("2026-11-02")]
    assert pending(session) == 0 and stored(session)[("2026-11-02", ALL, ALL, ALL)]["n_events"] == 4
    assert_same(stored(session), full_recompute(session, spec))


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_plan_whose_days_changed_before_its_write_is_dropped(engine: Engine, session: Session, spec: EvalSpec) -> None:
    load(session, spec, [ev("2026-11-02") for _ in range(3)])
    load(session, spec, [ev("2026-11-02", action="reject")], rebuild=False)
    with Session(engine) as s:
        upto = stale.last_mark(s)
    assert upto is not None
    plan = merge_plan.plan_merge(engine, spec, marked_upto=upto)
    assert plan is not None and plan.changed == [D("2026-11-02")] and len(plan.pending_ids) == 1
    # meanwhile another rebuilder (`draftdesk metrics rebuild`, say) merges the day, and a batch arrives
    with session_scope(engine) as other:
        stale.rebuild_stale(session=other, spec=spec)
        ingest.ingest_events(session=other, spec=spec, items=[ev("2026-11-02")])
    with session_scope(engine) as s:
        assert merge_plan.apply_plan(s, plan, marked_upto=upto) is False
        s.rollback()
    assert planned_pass(engine, spec) == [D("2026-11-02")]
    day = stored(session)[("2026-11-02", ALL, ALL, ALL)]
    assert (day["n_events"], day["n_reject"]) == (5, 1)  # counted once each, not the plan's stale rows
    assert_same(stored(session), full_recompute(session, spec))


def test_postgresql_merges_in_its_write_transaction(engine: Engine, spec: EvalSpec) -> None:
    """No plan on PostgreSQL (no database-wide write lock to spare); SQLite always plans."""
    plan = merge_plan.plan_merge(engine, spec, marked_upto=0)
    assert (plan is None) == (engine.dialect.name == "postgresql")
