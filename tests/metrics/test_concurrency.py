"""Ingestion from several processes at once: no lock for a batch, per-day locks for rebuilds of only the changed days, exact aggregates."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from tests.conftest import PG_URL, SPEC_PATH, TEST_SECRET
from tests.factories import make_user
from tests.metrics.conftest import ev, load
from webapp.auth import service as auth_service
from webapp.core.spec import EvalSpec
from webapp.metrics import aggregates, daily, ingest, stale
from webapp.metrics import background as background_job
from webapp.metrics.models import DailyAggregate, Event

D = dt.date.fromisoformat
DAYS = ["2026-11-02", "2026-11-03", "2026-11-04"]


def _event(i: int) -> dict[str, Any]:
    """Event number i: the same i always gives the same event (the overlap between the processes)."""
    actions = ["accept", "edit", "reject", "escalate"]
    return ev(
        DAYS[i % 3], hour=i % 24, event_id=f"p{i}", ticket_id=f"t{i}", action=actions[i % 4],
        draft_text="hello there" * (1 + i % 3), sent_text="hello their" * (1 + i % 2),
        latency_ms=100.0 * (i % 37), confidence=(i % 10) / 10, agent_id=f"agent-{i % 5}",
        intent=["billing_charge", "plan_change"][i % 2], plan=["free", "pro", "enterprise"][i % 3],
    )


def _post_batches(db_url: str, token: str, ids: list[int], background: bool, out: Any) -> None:
    """In a child process: post the events in batches of 40 through the API; report what was created."""
    from webapp.app.main import create_app
    from webapp.core.config import Settings

    settings = Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, background_jobs=background)
    app = create_app(settings)
    created = []
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        for k in range(0, len(ids), 40):
            r = client.post("/api/v1/events", json=[_event(i) for i in ids[k : k + 40]])
            assert r.status_code == 200, r.text
            created += [x["event_id"] for x in r.json()["results"] if x["status"] == "created"]
    app.state.engine.dispose()
    out.put(created)


COLS = [*aggregates._AGG_COLUMNS, "calib"]


def _frame(rows: Any) -> pd.DataFrame:
    """Aggregate rows (stored, or computed with calib as JSON text) as a frame in a fixed order."""
    df = pd.DataFrame([tuple(r[: len(COLS)]) for r in rows], columns=COLS)
    df["day"] = [d if isinstance(d, dt.date) else D(d) for d in df["day"]]
    df["calib"] = [json.loads(c) if isinstance(c, str) else c for c in df["calib"]]
    return df.sort_values(["day", *aggregates.SEGMENT_DIMS]).reset_index(drop=True)


@pytest.mark.parametrize("background", [False, True], ids=["inline-rebuild", "background-rebuilder"])
def test_two_processes_posting_overlapping_batches_for_the_same_days(
    db_url: str, engine: Engine, session: Session, spec: EvalSpec, background: bool
) -> None:
    """Without background jobs each request rebuilds; with them, serve's rebuilders run while batches arrive."""
    user = make_user(session, email="agent-tool@example.test", roles=["labeler"])
    _, token = auth_service.create_token(session=session, user=user, name="tool", scopes=["ingest"])
    session.commit()
    # each process sends 240 events; 120 of them (p120..p239) are sent by both, in opposite orders
    first, second = list(range(0, 240)), list(range(239, 119, -1)) + list(range(240, 360))
    ctx = multiprocessing.get_context("spawn")
    results: Any = ctx.Queue()
    procs = [ctx.Process(target=_post_batches, args=(db_url, token, ids, background, results)) for ids in (first, second)]
    for p in procs:
        p.start()
    created = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    # 0 lost, 0 duplicated: every event once, created by exactly one of the processes
    assert sorted(created[0] + created[1]) == sorted(f"p{i}" for i in range(360))
    session.expire_all()
    assert session.execute(select(func.count()).select_from(Event)).scalar_one() == 360
    # the aggregates equal a recomputation from the raw events, for every segment kept
    raw = aggregates.raw_frame(session, days=[D(d) for d in DAYS])
    fresh = _frame(aggregates.compute_aggregates(raw, spec))
    # every stale day rebuilt, as serve's rebuilder does
    background_job.rebuild_pass(engine=engine, spec=spec)
    session.expire_all()
    assert stale.stale_days(session) == set()
    # what readers then see equals the recomputation (all traffic and one rollup)
    for seg in ({"intent": None}, {"intent": "plan_change"}):
        want = fresh[(fresh["intent"] == (seg["intent"] or "*")) & (fresh["plan"] == "*") & (fresh["agent_id"] == "*")]
        got = daily.daily_metrics(session=session, spec=spec, start=D(DAYS[0]), end=D(DAYS[-1]), **seg)
        assert [d.events for d in got] == want["n_events"].tolist()
        assert [d.latency_p95_s for d in got] == pytest.approx(want["lat_p95_s"].astype(float).tolist(), rel=1e-12)
        assert [d.accept_rate for d in got] == pytest.approx((want["n_accept"] / want["n_shown"]).tolist(), rel=1e-12)
    t = DailyAggregate.__table__.c  # type: ignore[attr-defined]
    stored = _frame(session.execute(select(*[t[c] for c in COLS])).all())
    assert len(stored) == len(fresh) > 3
    assert stored[["day", *aggregates.SEGMENT_DIMS]].equals(fresh[["day", *aggregates.SEGMENT_DIMS]])
    for col in aggregates._SUM_COLS + ["lat_p95_s"]:
        assert stored[col].astype(float).to_numpy() == pytest.approx(fresh[col].astype(float).to_numpy(), rel=1e-12)
    calib_stored = np.asarray(stored["calib"].tolist(), dtype=float).ravel()
    assert calib_stored == pytest.approx(np.asarray(fresh["calib"].tolist(), dtype=float).ravel(), rel=1e-12)
    assert int(stored[(stored["intent"] == "*") & (stored["plan"] == "*") & (stored["agent_id"] == "*")]["n_events"].sum()) == 360


def test_rebuild_reads_only_the_new_events_of_the_changed_days(engine: Engine, session: Session, spec: EvalSpec) -> None:
    days = [D("2026-11-01") + dt.timedelta(days=i) for i in range(10)]
    load(session, spec, [ev(d) for d in days for _ in range(3)], rebuild=False)
    assert stale.rebuild_stale(session=session, spec=spec) == days
    session.commit()
    reads: list[tuple[str, Any]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _spy(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if "has_sent" in statement:  # the raw-event read of the rebuild
            reads.append((statement, parameters))

    try:
        # a late event for the first day and one for the last: the eight days between stay unread
        load(session, spec, [ev(days[0]), ev(days[-1])], rebuild=False)
        assert reads == []  # ingestion only marks the days stale
        assert stale.rebuild_stale(session=session, spec=spec) == [days[0], days[-1]]
    finally:
        event.remove(engine, "before_cursor_execute", _spy)
    assert len(reads) == 1
    statement, params = reads[0]
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(statement, params).all()
    assert sorted({str(r[0]) for r in rows}) == [str(days[0]), str(days[-1])]
    # the merge reads the two new events only, not the 8 events of their days
    assert len(rows) == 2 and "pending" in statement
    one = aggregates.raw_frame(session, days=[days[0], days[-1]])
    assert len(one) == 8 and set(one["day"]) == {days[0], days[-1]}


if PG_URL:  # advisory locks exist on PostgreSQL only (SQLite lets one writer at a time anyway)

    @pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
    def test_batches_never_wait_and_only_rebuilds_of_the_same_day_do(db_url: str, engine: Engine, spec: EvalSpec) -> None:
        with Session(engine) as holder:
            # an uncommitted batch for 2 November: another batch for that day does not wait for it
            ingest.ingest_events(session=holder, spec=spec, items=[ev("2026-11-02")])
            with Session(engine) as same_day:
                same_day.execute(text("SET LOCAL lock_timeout = '3s'"))
                res = ingest.ingest_events(session=same_day, spec=spec, items=[ev("2026-11-02"), ev("2026-11-03")])
                same_day.commit()
                assert [r.status for r in res] == ["created", "created"]
            holder.commit()
        with Session(engine) as rebuilding:
            # a rebuild holds its days' locks until it commits
            aggregates.rebuild_days(session=rebuilding, spec=spec, days=[D("2026-11-02")])
            with Session(engine) as other_day:
                other_day.execute(text("SET LOCAL lock_timeout = '3s'"))
                aggregates.rebuild_days(session=other_day, spec=spec, days=[D("2026-11-03")])
                other_day.commit()
            with Session(engine) as same_day:
                same_day.execute(text("SET LOCAL lock_timeout = '500ms'"))
                with pytest.raises(OperationalError, match="lock timeout"):
                    aggregates.rebuild_days(session=same_day, spec=spec, days=[D("2026-11-02")])
                same_day.rollback()
            rebuilding.commit()
        with Session(engine) as s:
            assert s.execute(select(func.count()).select_from(Event)).scalar_one() == 3
            assert stale.stale_days(s) == {D("2026-11-02"), D("2026-11-03")}  # rebuild_days leaves marks to rebuild_stale
