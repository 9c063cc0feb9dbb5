"""Days whose stored figures lag their events say so (API, /metrics, home card) until the rebuild pass."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlmodel import Session, select

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.metrics.conftest import ev
from webapp.app.main import create_app
from webapp.core.config import Settings
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.metrics.background import rebuild_pass
from webapp.metrics.models import StaleDay


@pytest.fixture
def settings(db_url: str) -> Settings:
    # as under `serve`: the ingesting request leaves the rebuild to the background pass (run by hand here)
    return Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, separate_jobs=True)


@pytest.fixture
def app(settings: Settings) -> Iterator[object]:
    application = create_app(settings)
    yield application
    application.state.engine.dispose()


def daily(reader: TestClient, start: str, end: str, **segment: str) -> list[dict[str, object]]:
    r = reader.get("/api/v1/metrics/daily", params={"start": start, "end": end, **segment})
    assert r.status_code == 200, r.text
    return r.json()


def test_a_day_with_events_not_yet_in_its_figures_is_flagged_until_the_pass(
    app: object, api_as: Callable[..., TestClient], client_as: Callable[..., TestClient], spec: EvalSpec
) -> None:
    agent = api_as(scopes=["ingest"])
    reader = api_as("support_lead")
    before = utcnow().replace(microsecond=0) - dt.timedelta(seconds=1)
    r = agent.post("/api/v1/events", json=[ev("2026-11-02"), ev("2026-11-02", action="reject"), ev("2026-11-03", intent="plan_change")])
    assert r.status_code == 200 and r.json()["created"] == 3
    days = daily(reader, "2026-11-01", "2026-11-03")
    assert [d["updating"] for d in days] == [False, True, True]
    assert [d["pending_events"] for d in days] == [0, 2, 1]
    assert days[0]["updating_since"] is None
    since = dt.datetime.fromisoformat(str(days[1]["updating_since"]))
    assert before <= since <= utcnow() + dt.timedelta(seconds=1)
    # the figures are those of the last pass (none yet), beside the count that says events wait
    assert days[1]["events"] == 0 and days[1]["accept_rate"] is None
    # a segment counts its own waiting events; a segment without any is not updating
    billing = daily(reader, "2026-11-02", "2026-11-03", intent="billing_charge")
    assert [(d["updating"], d["pending_events"]) for d in billing] == [(True, 2), (False, 0)]

    page = client_as("support_lead").get("/metrics", params={"start": "2026-11-01", "end": "2026-11-03"})
    assert page.status_code == 200
    assert "Updating 2026-11-02 (2 new events since" in page.text and "2026-11-03 (1 new event since" in page.text
    assert "+2 updating" in page.text
    home = client_as("support_lead").get("/")
    assert "Figures updating: 2026-11-02 (+2 events since" in home.text

    engine = app.state.engine  # type: ignore[attr-defined]
    assert rebuild_pass(engine=engine, spec=spec) == [dt.date(2026, 11, 2), dt.date(2026, 11, 3)]
    days = daily(reader, "2026-11-01", "2026-11-03")
    assert [(d["events"], d["updating"], d["pending_events"], d["updating_since"]) for d in days] == [
        (0, False, 0, None),
        (2, False, 0, None),
        (1, False, 0, None),
    ]
    assert days[1]["accept_rate"] == 0.5 and days[1]["reject_rate"] == 0.5
    page = client_as("support_lead").get("/metrics", params={"start": "2026-11-01", "end": "2026-11-03"})
    assert "Updating 2026-11-0" not in page.text and "updating</span>" not in page.text
    assert "Figures updating" not in client_as("support_lead").get("/").text


def test_a_mark_whose_events_a_full_rebuild_took_does_not_flag_the_day(
    app: object, api_as: Callable[..., TestClient], session: Session, spec: EvalSpec
) -> None:
    from webapp.metrics import aggregates

    agent = api_as(scopes=["ingest"])
    assert agent.post("/api/v1/events", json=[ev("2026-11-02")]).json()["created"] == 1
    aggregates.rebuild_days(session=session, spec=spec, days=[dt.date(2026, 11, 2)])  # `draftdesk metrics rebuild`
    session.commit()
    (day,) = daily(api_as("pm"), "2026-11-02", "2026-11-02")
    assert (day["events"], day["updating"], day["pending_events"]) == (1, False, 0)


def test_a_pass_rebuilds_the_days_stale_when_it_began_and_leaves_later_batches_to_the_next(
    app: object, api_as: Callable[..., TestClient], spec: EvalSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a steady stream of batches a pass ends (it ran back to back before, bench_realistic 3 Dec)."""
    from webapp.metrics import merge_plan, stale

    agent = api_as(scopes=["ingest"])
    reader = api_as("support_lead")
    assert agent.post("/api/v1/events", json=[ev("2026-11-02")]).json()["created"] == 1
    real_last, real_rebuild = stale.last_mark, merge_plan.rebuild_stale_planned
    calls: list[object] = []

    def start_then_a_batch_arrives(session: Session) -> int | None:
        upto = real_last(session)
        # a batch committed after the pass began: its mark is newer than the pass's start
        assert agent.post("/api/v1/events", json=[ev("2026-11-02", action="reject")]).json()["created"] == 1
        return upto

    def counted(**kwargs: object) -> list[dt.date]:
        calls.append(kwargs.get("marked_upto"))
        return real_rebuild(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stale, "last_mark", start_then_a_batch_arrives)
    monkeypatch.setattr(merge_plan, "rebuild_stale_planned", counted)
    engine = app.state.engine  # type: ignore[attr-defined]
    assert rebuild_pass(engine=engine, spec=spec) == [dt.date(2026, 11, 2)]
    # one rebuild, then one call that finds nothing left of what was stale at the start: the pass ended
    assert len(calls) == 2 and calls[0] is not None and calls[0] == calls[1]
    day = daily(reader, "2026-11-02", "2026-11-02")[0]
    # the batch's events merged with the day (merge_pending takes the day's pending events); its mark,
    # made after the start, is left to the next pass, which finds nothing new
    assert (day["events"], day["updating"], day["pending_events"]) == (2, False, 0)
    with Session(engine) as s:
        assert len(s.exec(select(StaleDay)).all()) == 1
    monkeypatch.setattr(stale, "last_mark", real_last)
    assert rebuild_pass(engine=engine, spec=spec) == [dt.date(2026, 11, 2)]
    day = daily(reader, "2026-11-02", "2026-11-02")[0]
    assert (day["events"], day["updating"], day["pending_events"]) == (2, False, 0)
    assert day["reject_rate"] == pytest.approx(1 / 2)
    with Session(engine) as s:
        assert s.exec(select(StaleDay)).all() == []
