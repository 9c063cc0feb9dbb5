"""`draftdesk import events`: JSONL and CSV, all-or-nothing, FILE:LINE: field: reason, exit 2."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import Result
from sqlalchemy import func, select
from sqlmodel import Session
from typer.testing import CliRunner

from tests.metrics.conftest import ev, load
from webapp.core.spec import EvalSpec
from webapp.metrics import bulkload, daily
from webapp.metrics.models import Event

Import = Callable[..., Result]


@pytest.fixture
def import_events(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Import:
    """Run `draftdesk import events FILE [options]` on the test database."""
    from webapp.app.cli import app as cli_app

    monkeypatch.setenv("DRAFTDESK_DATABASE_URL", db_url)
    monkeypatch.setenv("DRAFTDESK_MODE", "dev")
    return lambda path, *args: CliRunner().invoke(cli_app, ["import", "events", str(path), *args])


def _jsonl(path: Path, events: list[Any], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + tail)
    return path


def _count(session: Session) -> int:
    session.expire_all()
    return int(session.execute(select(func.count()).select_from(Event)).scalar_one())


def test_jsonl_import_then_rerun_skips_duplicates(
    tmp_path: Path, session: Session, spec: EvalSpec, import_events: Import
) -> None:
    events = [ev("2026-11-02", latency_ms=1000), ev("2026-11-02", latency_ms=3000, action="reject"), ev("2026-11-03")]
    f = _jsonl(tmp_path / "events.jsonl", events)
    r = import_events(f, "--quiet")
    assert r.exit_code == 0, r.output
    assert "3 events imported" in r.output
    assert _count(session) == 3
    d2 = daily.daily_metrics(session=session, spec=spec, start=dt.date(2026, 11, 2), end=dt.date(2026, 11, 2))[0]
    assert (d2.events, d2.reject_rate, d2.latency_p95_s) == (2, 0.5, pytest.approx(1 + 0.95 * 2))
    stored = session.execute(select(Event).where(Event.event_id == events[0]["event_id"])).scalars().one()
    assert stored.occurred_at.replace(tzinfo=None) == dt.datetime(2026, 11, 2, 12)  # read back through the ORM
    r = import_events(f, "--quiet")
    assert r.exit_code == 0 and "0 events imported, 3 already present" in r.output
    assert _count(session) == 3


def test_bad_records_are_named_by_file_line_and_field_in_line_order_and_nothing_is_written(
    tmp_path: Path, session: Session, monkeypatch: pytest.MonkeyPatch, import_events: Import
) -> None:
    monkeypatch.setattr(bulkload, "CHUNK", 2)  # the errors fall in different batches
    first, good = ev("2026-11-02"), [ev("2026-11-02") for _ in range(3)]
    lines = [first, good[0], good[1], ev("2026-11-02", escalated="perhaps"), good[2], first]
    f = _jsonl(tmp_path / "events.jsonl", lines, tail="\nnot json\n")  # a blank line 7 still counts
    r = import_events(f)
    assert r.exit_code == 2
    where = [
        r.output.index(f"{f}:4: escalated:"),
        r.output.index(f"{f}:6: event_id: '{first['event_id']}' repeats line 1"),
        r.output.index(f"{f}:8: (line): not a JSON object"),
    ]
    assert where == sorted(where)
    assert "3 bad record(s); nothing imported" in r.output
    assert _count(session) == 0
    r = import_events(tmp_path / "nope.jsonl")
    assert r.exit_code == 2 and "file not found" in r.output


def test_csv_with_empty_cells_as_null(
    tmp_path: Path, session: Session, spec: EvalSpec, import_events: Import
) -> None:
    f = tmp_path / "events.csv"
    f.write_text(
        "event_id,ticket_id,occurred_at,intent,draft_shown,action,draft_text,sent_text,cost_usd,escalated\n"
        "c1,t1,2026-11-02T09:00:00+00:00,billing_charge,true,edit,kitten,sitting,0.02,false\n"
        "c2,t2,2026-11-02T10:00:00+00:00,,false,,,,,true\n"
    )
    r = import_events(f, "--quiet")
    assert r.exit_code == 0, r.output
    d = daily.daily_metrics(session=session, spec=spec, start=dt.date(2026, 11, 2), end=dt.date(2026, 11, 2))[0]
    assert d.events == 2 and d.drafts_shown == 1
    assert d.edit_distance == pytest.approx(3 / 7) and d.accept_rate == 0.0  # 0.43 is beyond the minor-edit limit
    assert d.escalation_rate == 0.5 and d.cost_per_draft == pytest.approx(0.02)
    f.write_text("event_id,ticket_id,occurred_at,draft_shown,escalated\nc3,t3,2026-11-02,yes,no\n")
    r = import_events(f)
    assert r.exit_code == 2 and f"{f}:2: occurred_at:" in r.output


def test_import_in_batches_with_some_events_already_stored(
    tmp_path: Path, session: Session, spec: EvalSpec, monkeypatch: pytest.MonkeyPatch, import_events: Import
) -> None:
    """Batches of 4 events: the first ones are copied straight in; on PostgreSQL the one holding an event
    already stored rolls back to its savepoint and it and the rest go through the staging table."""
    monkeypatch.setattr(bulkload, "CHUNK", 4)
    days = ["2026-11-02", "2026-11-03", "2026-11-04"]
    actions = ["accept", "edit", "reject"]
    events = [
        ev(days[i % 3], hour=i, latency_ms=100.0 * (i + 1), action=actions[i // 3 % 3], sent_text="Hello there")
        for i in range(18)
    ]
    load(session, spec, [events[10], events[11], events[17]])  # through the API's service, before the import
    r = import_events(_jsonl(tmp_path / "events.jsonl", events), "--quiet")
    assert r.exit_code == 0, r.output
    assert "15 events imported, 3 already present" in r.output
    assert _count(session) == 18
    stored = daily.daily_metrics(session=session, spec=spec, start=dt.date(2026, 11, 2), end=dt.date(2026, 11, 4))
    for k, day in enumerate(stored):
        mine = [e for i, e in enumerate(events) if i % 3 == k]
        assert day.events == 6
        assert day.reject_rate == pytest.approx(sum(e["action"] == "reject" for e in mine) / 6)
        assert day.latency_p95_s == pytest.approx(float(np.percentile([e["latency_ms"] / 1000 for e in mine], 95)))
