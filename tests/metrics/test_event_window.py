"""The sane event window (issue 33): events outside [2000-01-01, now + 1 day] are refused per event at
every entry, and a row outside it that is already stored (written before the rule, or by hand) breaks
no reader: the home page, /metrics, GET /api/v1/alerts and the alert pass still answer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlmodel import Session, col
from typer.testing import CliRunner

from tests.metrics.conftest import ev, load
from webapp.alerts import outbox as alerts_outbox
from webapp.app import cli
from webapp.core.spec import EvalSpec
from webapp.metrics.aggregates import rebuild_all
from webapp.metrics.event_input import WINDOW_START, window_error
from webapp.metrics.models import DailyAggregate, Event


def _stored_ids(session: Session) -> set[str]:
    session.rollback()  # a fresh snapshot: what the request committed
    return set(session.execute(select(col(Event.event_id))).scalars())


def _at(moment: dt.datetime, event_id: str) -> dict[str, Any]:
    e = ev("2026-11-02", event_id=event_id)
    e["occurred_at"] = moment.isoformat().replace("+00:00", "Z")
    return e


class TestWindowRule:
    def test_bounds_counted_by_hand(self) -> None:
        now = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)
        assert dt.datetime(2000, 1, 1, tzinfo=dt.UTC) == WINDOW_START
        assert window_error(dt.datetime(2000, 1, 1, tzinfo=dt.UTC), now=now) is None
        assert window_error(dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC), now=now) is None  # exactly a day ahead
        early = window_error(dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), now=now)
        assert early is not None and early.field == "occurred_at" and "before 2000-01-01" in early.reason
        late = window_error(dt.datetime(2026, 11, 28, 12, 0, 1, tzinfo=dt.UTC), now=now)
        assert late is not None and late.field == "occurred_at" and "more than one day" in late.reason
        # an offset is compared as the instant it names: 2000-01-01T00:30+01:00 is 1999-12-31T23:30Z
        offset = dt.datetime(2000, 1, 1, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=1)))
        assert window_error(offset, now=now) is not None


class TestApiRefusesOutsideTheWindow:
    def test_ancient_and_future_events_refused_per_event(
        self, api_as: Callable[..., TestClient], session: Session
    ) -> None:
        agent = api_as(scopes=["ingest"])
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        batch = [
            ev("2026-11-02", event_id="ok-1"),
            {**ev("2026-11-02", event_id="ancient"), "occurred_at": "0364-04-23T01:02:07Z"},
            _at(dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC), "y1999"),
            _at(dt.datetime(2000, 1, 1, tzinfo=dt.UTC), "y2000"),
            _at(now + dt.timedelta(days=1, minutes=5), "tomorrow-plus"),
            _at(now + dt.timedelta(hours=23), "tomorrow"),
        ]
        r = agent.post("/api/v1/events", json=batch)
        assert r.status_code == 200, r.text
        body = r.json()
        statuses = {x["event_id"]: x["status"] for x in body["results"]}
        assert statuses == {
            "ok-1": "created", "ancient": "invalid", "y1999": "invalid",
            "y2000": "created", "tomorrow-plus": "invalid", "tomorrow": "created",
        }  # fmt: skip
        assert (body["created"], body["invalid"], body["duplicate"]) == (3, 3, 0)
        refused = {x["event_id"]: x for x in body["results"] if x["status"] == "invalid"}
        for x in refused.values():
            assert x["field"] == "occurred_at"
            assert x["errors"] == [{"field": "occurred_at", "reason": x["reason"]}]
        assert "0364-04-23T01:02:07" in refused["ancient"]["reason"]
        assert "before 2000-01-01" in refused["ancient"]["reason"]
        assert "more than one day" in refused["tomorrow-plus"]["reason"]
        assert _stored_ids(session) == {"ok-1", "y2000", "tomorrow"}


class TestImportRefusesOutsideTheWindow:
    @pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
    def test_file_and_line_named_nothing_imported(self, tmp_path: Path, db_url: str, session: Session, suffix: str) -> None:
        import json

        rows = [ev("2026-11-02", event_id="a"), ev("2026-11-02", event_id="b"), ev("2026-11-02", event_id="c")]
        rows[1]["occurred_at"] = "0364-04-23T01:02:07Z"
        rows[2]["occurred_at"] = "2999-01-01T00:00:00Z"
        path = tmp_path / f"events{suffix}"
        if suffix == ".csv":
            cols = list(rows[0])
            lines = [",".join(cols)] + [",".join(str(r[c]).lower() if isinstance(r[c], bool) else str(r[c]) for c in cols) for r in rows]
            path.write_text("\n".join(lines) + "\n")
            line_of = {"b": 3, "c": 4}  # the header is line 1
        else:
            path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            line_of = {"b": 2, "c": 3}
        out = CliRunner().invoke(cli.app, ["import", "events", str(path), "--quiet"], env={"DRAFTDESK_DATABASE_URL": db_url})
        assert out.exit_code != 0
        text = " ".join(out.output.split())
        assert f"{path}:{line_of['b']}: occurred_at:" in text and "before 2000-01-01" in text
        assert f"{path}:{line_of['c']}: occurred_at:" in text and "more than one day" in text
        assert "nothing imported" in text
        assert _stored_ids(session) == set()


# Rows the validation would refuse, written straight to the table (as an older version let them in).
_BAD_DAYS = [
    ("ancient", dt.datetime(364, 4, 23, 1, 2, 7, tzinfo=dt.UTC)),
    ("far-future", dt.datetime(9999, 12, 30, tzinfo=dt.UTC)),
    ("y1990", dt.datetime(1990, 6, 1, tzinfo=dt.UTC)),
]


def _store_bad_rows(session: Session) -> None:
    for event_id, at in _BAD_DAYS:
        session.add(Event(event_id=event_id, ticket_id="t", occurred_at=at, day=at.date(), draft_shown=True,
                          action="accept", draft_text="x", sent_text="x", escalated=False))  # fmt: skip
    session.commit()


class TestStoredRowsBreakNoReader:
    def test_pages_alerts_and_the_alert_pass_answer(
        self, session: Session, spec: EvalSpec, client_as: Callable[..., TestClient], api_as: Callable[..., TestClient]
    ) -> None:
        today = dt.datetime.now(dt.UTC).date()
        load(session, spec, [ev(today - dt.timedelta(days=i), latency_ms=900.0) for i in range(3)])
        _store_bad_rows(session)
        # their aggregates too, as `metrics rebuild` made them before the fix
        rebuild_all(session=session, spec=spec)
        session.commit()
        assert session.execute(select(func.count()).select_from(DailyAggregate).where(
            col(DailyAggregate.day) == dt.date(364, 4, 23))).scalar_one() > 0  # fmt: skip
        lead = client_as("support_lead")
        for path in ("/", "/metrics"):
            r = lead.get(path)
            assert r.status_code == 200, (path, r.status_code, r.text[:500])
        r = lead.get("/metrics?range=7d")
        assert r.status_code == 200
        reader = api_as("support_lead", scopes=["support_lead"])
        r = reader.get("/api/v1/alerts")
        assert r.status_code == 200, r.text
        # the alerts evaluated the sane days: the last one evaluated is today, not year 9999 (an
        # alert whose window is longer than the three days of data has evaluated none)
        assert {a["last_evaluated"] for a in r.json()} == {today.isoformat(), None}
        week = {"start": (today - dt.timedelta(days=6)).isoformat(), "end": today.isoformat()}
        r = reader.get("/api/v1/metrics/daily", params=week)
        assert r.status_code == 200, r.text
        assert [d["events"] for d in r.json()] == [0, 0, 0, 0, 1, 1, 1]
        # the periodic alert pass evaluates without an error
        alerts_outbox.record_transitions(session=session, spec=spec)
        session.commit()
