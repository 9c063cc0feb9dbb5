"""Retention then rebuild keeps history (issue 33): the `pruned_before` watermark, batched pruning,
rebuilds that leave pruned days alone, and late events for pruned days refused with nothing written.

Hand-counted data (time zone UTC, NOW 2026-11-27 12:00, 10 days kept, so the cut-off day is 2026-11-17):
- 2026-11-10: 12 events, 9 accepted and 3 rejected (accept rate 9/12 = 0.75); one of the accepted
  is cited by a hallucination report, so it is kept.
- 2026-11-16: 13 events, 12 accepted and 1 rejected (12/13).
- 2026-11-17: 5 events, 4 accepted (4/5); the cut-off day itself is kept whole.
- 2026-11-20: 3 events, all accepted.
Pruned: 12 - 1 + 13 = 24 events; with batches of 10 rows: 10, 10, 4.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import event as sa_event
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col
from typer.testing import CliRunner

from tests.metrics.conftest import ev, load
from webapp.app import cli
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.metrics import stale
from webapp.metrics.aggregates import rebuild_all
from webapp.metrics.daily import daily_metrics
from webapp.metrics.ingest import ingest_events
from webapp.metrics.models import DailyAggregate, Event, HallucinationReport, StaleDay
from webapp.metrics.watermark import advance_pruned_before, days_open_to_rebuild, pruned_before
from webapp.ops.retention import Retention, prune_database

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
CUTOFF = dt.date(2026, 11, 17)
D10, D16, D17, D20 = dt.date(2026, 11, 10), dt.date(2026, 11, 16), CUTOFF, dt.date(2026, 11, 20)
KEEP = Retention(event_days=10)


def _events() -> list[dict[str, Any]]:
    out = [ev(D10, h, event_id=f"d10-{h}", action="accept" if h < 9 else "reject") for h in range(12)]
    out += [ev(D16, h, event_id=f"d16-{h}", action="accept" if h < 12 else "reject") for h in range(13)]
    out += [ev(D17, h, event_id=f"d17-{h}", action="accept" if h < 4 else "reject") for h in range(5)]
    out += [ev(D20, h, event_id=f"d20-{h}") for h in range(3)]
    return out


def _seed(session: Session, spec: EvalSpec) -> None:
    results = load(session, spec, _events())
    assert {r.status for r in results} == {"created"}
    session.add(HallucinationReport(event_id="d10-0", note="wrong refund window"))
    session.commit()


def _figures(session: Session, spec: EvalSpec) -> dict[dt.date, tuple[int, float | None, float | None]]:
    session.rollback()  # a fresh snapshot
    days = daily_metrics(session=session, spec=spec, start=D10, end=D20)
    return {d.day: (d.events, d.accept_rate, d.reject_rate) for d in days if d.events}


EXPECTED = {
    D10: (12, 9 / 12, 3 / 12),
    D16: (13, 12 / 13, 1 / 13),
    D17: (5, 4 / 5, 1 / 5),
    D20: (3, 1.0, 0.0),
}


def _aggregate_rows(session: Session) -> list[tuple[Any, ...]]:
    session.rollback()
    t = table_of(DailyAggregate).c
    rows = session.execute(
        select(t.day, t.intent, t.plan, t.agent_id, t.n_events, t.n_shown, t.n_accept, t.n_reject, t.calib).order_by(
            t.day, t.intent, t.plan, t.agent_id
        )
    )
    return [tuple(r) for r in rows]


def _event_count(session: Session) -> int:
    session.rollback()
    return session.execute(select(func.count()).select_from(Event)).scalar_one()


class TestPruneInBatches:
    def test_watermark_first_then_batches_of_at_most_the_limit_each_committed(
        self, session: Session, engine: Engine, spec: EvalSpec
    ) -> None:
        _seed(session, spec)
        assert _figures(session, spec) == EXPECTED
        commits: list[int] = []

        def count_commit(conn: object) -> None:
            commits.append(1)

        sa_event.listen(engine, "commit", count_commit)
        try:
            report = prune_database(engine, KEEP, now=NOW, batch=10)
        finally:
            sa_event.remove(engine, "commit", count_commit)
        assert report.events == 24
        assert report.event_batches == (10, 10, 4)
        # one transaction for the small tables and the watermark, then one per batch (the last
        # batch, shorter than the limit, ends the loop)
        assert len(commits) == 4
        assert report.pruned_before == CUTOFF
        session.rollback()
        left = sorted(session.execute(select(col(Event.event_id))).scalars())
        assert left == sorted(["d10-0", *[f"d17-{h}" for h in range(5)], *[f"d20-{h}" for h in range(3)]])
        assert pruned_before(session) == CUTOFF

    def test_default_batch_is_ten_thousand(self) -> None:
        from webapp.ops.retention import PRUNE_BATCH_ROWS

        assert PRUNE_BATCH_ROWS == 10_000

    def test_no_retention_no_watermark(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _seed(session, spec)
        report = prune_database(engine, Retention(), now=NOW)
        assert (report.events, report.event_batches, report.pruned_before) == (0, (), None)
        assert _event_count(session) == 33


class TestRebuildAfterPrune:
    def test_metrics_rebuild_keeps_pruned_days_figures(
        self, session: Session, engine: Engine, spec: EvalSpec, db_url: str
    ) -> None:
        _seed(session, spec)
        before = _aggregate_rows(session)
        prune_database(engine, KEEP, now=NOW, batch=10)
        # the routine `draftdesk metrics rebuild`
        out = CliRunner().invoke(cli.app, ["metrics", "rebuild"], env={"DRAFTDESK_DATABASE_URL": db_url})
        assert out.exit_code == 0, out.output
        assert "days before the retention watermark 2026-11-17 kept as they were" in " ".join(out.output.split())
        assert _figures(session, spec) == EXPECTED
        assert _aggregate_rows(session) == before
        # the service call too, and a day after the watermark is still rebuilt from its events
        daily = table_of(DailyAggregate)
        session.execute(daily.delete().where(daily.c.day == D20))
        rebuild_all(session=session, spec=spec)
        session.commit()
        assert _aggregate_rows(session) == before

    def test_the_background_pass_skips_a_stale_mark_of_a_pruned_day(
        self, session: Session, engine: Engine, spec: EvalSpec
    ) -> None:
        _seed(session, spec)
        before = _aggregate_rows(session)
        prune_database(engine, KEEP, now=NOW, batch=10)
        session.add(StaleDay(day=D16))  # e.g. left by a batch that raced the prune
        session.add(StaleDay(day=D20))
        session.commit()
        assert stale.rebuild_stale(session=session, spec=spec) == [D16, D20]
        session.commit()
        assert _aggregate_rows(session) == before
        assert session.execute(select(func.count()).select_from(StaleDay)).scalar_one() == 0

    def test_the_merge_leaves_a_pruned_days_pending_event_out(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        # an event stored (pending) just before the prune set the watermark: the merge must not add it
        _seed(session, spec)
        before = _aggregate_rows(session)
        prune_database(engine, KEEP, now=NOW, batch=10)
        at = dt.datetime.combine(D16, dt.time(12), dt.UTC)
        session.add(Event(event_id="raced-the-prune", ticket_id="t", occurred_at=at, day=D16, draft_shown=True,
                          action="accept", draft_text="x", sent_text="x", escalated=False, pending=True))  # fmt: skip
        session.add(StaleDay(day=D16))
        session.commit()
        stale.rebuild_stale(session=session, spec=spec)
        session.commit()
        assert _aggregate_rows(session) == before

    def test_days_open_to_rebuild(self, session: Session) -> None:
        assert days_open_to_rebuild(session, [D20, D10, D16, D20]) == [D10, D16, D20]
        advance_pruned_before(session=session, day=D16)
        assert days_open_to_rebuild(session, [D20, D10, D16]) == [D16, D20]


class TestWatermarkIsMonotonic:
    def test_never_moves_back(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        assert pruned_before(session) is None
        assert advance_pruned_before(session=session, day=D16) == D16
        assert advance_pruned_before(session=session, day=D10) == D16
        assert advance_pruned_before(session=session, day=D20) == D20
        session.commit()
        # a longer retention afterwards deletes less but does not reopen closed days
        report = prune_database(engine, Retention(event_days=30), now=NOW)
        assert report.pruned_before == D20


class TestLateEventsRefused:
    def _late(self) -> list[dict[str, Any]]:
        return [ev(D16, 23, event_id="late-16"), ev(dt.date(2026, 11, 1), 5, event_id="late-01")]

    def test_service_refuses_nothing_written(self, session: Session, engine: Engine, spec: EvalSpec) -> None:
        _seed(session, spec)
        prune_database(engine, KEEP, now=NOW, batch=10)
        events, rows = _event_count(session), _aggregate_rows(session)
        results = ingest_events(session=session, spec=spec, items=[*self._late(), ev(D17, 22, event_id="on-cutoff")])
        session.commit()
        assert [r.status for r in results] == ["invalid", "invalid", "created"]
        for r in results[:2]:
            assert [e.field for e in r.errors] == ["occurred_at"]
            assert "retention watermark 2026-11-17" in r.errors[0].reason
        assert "on 2026-11-16" in results[0].errors[0].reason
        assert _event_count(session) == events + 1  # only the event of the cut-off day
        assert session.execute(select(col(StaleDay.day))).scalars().all() == [D17]
        assert _aggregate_rows(session) == rows

    def test_api_answers_per_event(
        self, session: Session, engine: Engine, spec: EvalSpec, api_as: Callable[..., TestClient]
    ) -> None:
        _seed(session, spec)
        prune_database(engine, KEEP, now=NOW, batch=10)
        events, rows = _event_count(session), _aggregate_rows(session)
        r = api_as(scopes=["ingest"]).post("/api/v1/events", json=self._late())
        assert r.status_code == 200, r.text
        body = r.json()
        assert (body["created"], body["invalid"]) == (0, 2)
        first = body["results"][0]
        assert (first["event_id"], first["status"], first["field"]) == ("late-16", "invalid", "occurred_at")
        assert "2026-11-16T23:00:00+00:00" in first["reason"] and "retention watermark 2026-11-17" in first["reason"]
        assert _event_count(session) == events
        assert _aggregate_rows(session) == rows
        assert _figures(session, spec) == EXPECTED

    def test_import_names_file_and_line_nothing_imported(
        self, session: Session, engine: Engine, spec: EvalSpec, db_url: str, tmp_path: Path
    ) -> None:
        _seed(session, spec)
        prune_database(engine, KEEP, now=NOW, batch=10)
        events, rows = _event_count(session), _aggregate_rows(session)
        path = tmp_path / "late.jsonl"
        good = ev(D20, 20, event_id="fine")
        path.write_text("\n".join(json.dumps(e) for e in [good, *self._late()]) + "\n")
        out = CliRunner().invoke(cli.app, ["import", "events", str(path), "--quiet"], env={"DRAFTDESK_DATABASE_URL": db_url})
        assert out.exit_code != 0
        text = " ".join(out.output.split())
        assert f"{path}:2: occurred_at:" in text and f"{path}:3: occurred_at:" in text
        assert "retention watermark 2026-11-17" in text and "nothing imported" in text
        assert _event_count(session) == events  # not even the good line: all-or-nothing
        assert _aggregate_rows(session) == rows


class TestWatermarkShown:
    def test_metrics_page_footnote(
        self, session: Session, engine: Engine, spec: EvalSpec, client_as: Callable[..., TestClient]
    ) -> None:
        _seed(session, spec)
        lead = client_as("support_lead")
        page = lead.get("/metrics", params={"start": D10.isoformat(), "end": D20.isoformat()})
        assert page.status_code == 200 and 'id="metrics-pruned"' not in page.text
        prune_database(engine, KEEP, now=NOW, batch=10)
        page = lead.get("/metrics", params={"start": D10.isoformat(), "end": D20.isoformat()})
        assert page.status_code == 200
        assert 'id="metrics-pruned"' in page.text and "days before 2026-11-17 were pruned" in page.text
        # a range wholly after the watermark needs no footnote
        page = lead.get("/metrics", params={"start": D17.isoformat(), "end": D20.isoformat()})
        assert page.status_code == 200 and 'id="metrics-pruned"' not in page.text
