"""Every background job pass is recorded (job_run); /healthz and Prometheus show a job that stopped succeeding."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from tests.conftest import SPEC_PATH, TEST_SECRET
from webapp.app import jobs
from webapp.app.main import create_app
from webapp.core import periodic
from webapp.core.config import Settings
from webapp.core.timeutil import as_utc, utcnow
from webapp.metrics import background as metrics_background
from webapp.ops import jobruns
from webapp.ops.models import JobRun

T0 = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.UTC)


def row(session: Session, job: str) -> JobRun:
    session.expire_all()
    found = session.exec(select(JobRun).where(JobRun.job == job)).one_or_none()
    assert found is not None, f"no job_run row for {job}"
    return found


async def one_pass_of(run: Callable[..., object], app: object, record: jobs.Record) -> None:
    """Run a job's loop until it has recorded one pass, then cancel it (no waiting for its period)."""
    loop = asyncio.get_running_loop()
    recorded = asyncio.Event()

    def record_then_signal(job: str, period_s: float, error: BaseException | None) -> None:
        record(job, period_s, error)
        loop.call_soon_threadsafe(recorded.set)

    task = asyncio.ensure_future(run(app, record_then_signal))  # type: ignore[arg-type]
    try:
        await asyncio.wait_for(recorded.wait(), timeout=60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class TestRecordPass:
    def test_a_job_made_to_fail_records_its_error_and_the_next_success_clears_the_count(
        self, app: object, session: Session, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        engine: Engine = app.state.engine  # type: ignore[attr-defined]
        clock = iter([T0, T0 + dt.timedelta(seconds=30), T0 + dt.timedelta(seconds=60)])
        record = jobs.recorder(engine, clock=lambda: next(clock))

        def broken(**_: object) -> list[dt.date]:
            raise RuntimeError("the disk is full")

        monkeypatch.setattr(metrics_background, "rebuild_pass", broken)
        asyncio.run(one_pass_of(metrics_background.run, app, record))
        asyncio.run(one_pass_of(metrics_background.run, app, record))
        r = row(session, "metrics_rebuild")
        assert (r.failures, r.last_success_at, r.period_s) == (2, None, metrics_background.REBUILD_INTERVAL_S)
        assert r.last_error == "RuntimeError: the disk is full"
        assert as_utc(r.first_run_at) == T0 and as_utc(r.last_error_at or T0) == T0 + dt.timedelta(seconds=30)
        monkeypatch.undo()  # the real pass again: it succeeds
        asyncio.run(one_pass_of(metrics_background.run, app, record))
        r = row(session, "metrics_rebuild")
        assert r.failures == 0 and as_utc(r.last_success_at or T0) == T0 + dt.timedelta(seconds=60)
        assert r.last_error == "RuntimeError: the disk is full"  # the last error stays for whoever looks

    def test_start_jobs_records_every_job(self, db_url: str, session: Session) -> None:
        app = create_app(Settings(database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH))
        sqlite = db_url.startswith("sqlite")
        expected = [
            ("alerts", 0, True, False),
            ("figures", 0, True, False),
            ("gate_reports", 0, True, False),
            ("metrics_rebuild", 0, True, False),
            *([("planner_stats", 0, True, False)] if sqlite else []),  # SQLite's ANALYZE (PostgreSQL keeps its own)
            ("reactions", 0, True, False),
            ("retention", 0, True, False),
        ]

        async def run_until_recorded() -> None:
            tasks = jobs.start_jobs(app)
            try:
                for _ in range(600):
                    session.expire_all()
                    if len(session.exec(select(JobRun)).all()) == len(expected):
                        return
                    await asyncio.sleep(0.1)
                raise AssertionError("the jobs did not record their first passes")
            finally:
                await jobs.stop_jobs(tasks)

        try:
            asyncio.run(run_until_recorded())
        finally:
            app.state.engine.dispose()
        states = jobruns.job_states(session=session, now=utcnow())
        assert [(s.job, s.failures, s.last_success_at is not None, s.stalled) for s in states] == expected


class TestEvery:
    def test_a_failing_pass_is_recorded_and_the_loop_goes_on_to_the_next(self) -> None:
        calls: list[int] = []
        recorded: list[tuple[str, float, str | None]] = []

        def work() -> None:
            calls.append(len(calls))
            if len(calls) == 1:
                raise RuntimeError("the disk is full")

        async def three_passes() -> None:
            done = asyncio.Event()
            loop = asyncio.get_running_loop()

            def record(job: str, period_s: float, error: BaseException | None) -> None:
                recorded.append((job, period_s, None if error is None else str(error)))
                if len(recorded) == 3:
                    loop.call_soon_threadsafe(done.set)

            task = asyncio.ensure_future(periodic.every(0.01, "a_job", work, record))
            try:
                await asyncio.wait_for(done.wait(), timeout=30)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        asyncio.run(three_passes())
        assert recorded == [("a_job", 0.01, "the disk is full"), ("a_job", 0.01, None), ("a_job", 0.01, None)]
        assert calls == [0, 1, 2]


class TestStalled:
    def test_a_job_is_stalled_after_three_periods_without_success(self, session: Session) -> None:
        jobruns.record_pass(session=session, job="alerts", period_s=30, now=T0)
        jobruns.record_pass(session=session, job="alerts", period_s=30, now=T0 + dt.timedelta(seconds=30), error="boom")
        # a job that never succeeded counts from its first pass
        jobruns.record_pass(session=session, job="retention", period_s=3600, now=T0, error="boom")

        def stalled(at: dt.timedelta) -> dict[str, bool]:
            return {s.job: s.stalled for s in jobruns.job_states(session=session, now=T0 + at)}

        assert stalled(dt.timedelta(seconds=90)) == {"alerts": False, "retention": False}
        assert stalled(dt.timedelta(seconds=91)) == {"alerts": True, "retention": False}
        assert stalled(dt.timedelta(hours=3, seconds=1)) == {"alerts": True, "retention": True}

    def test_healthz_is_degraded_while_a_job_is_stalled_and_strict_fails(self, client: TestClient, session: Session) -> None:
        assert client.get("/healthz").json() == {"status": "ok"}  # no job has run: nothing to report
        now = utcnow()
        jobruns.record_pass(session=session, job="metrics_rebuild", period_s=30, now=now - dt.timedelta(seconds=80))
        jobruns.record_pass(session=session, job="alerts", period_s=30, now=now - dt.timedelta(seconds=100))
        session.commit()
        r = client.get("/healthz")
        assert r.status_code == 200
        assert r.json() == {
            "status": "degraded",
            "jobs": {"alerts": "stalled", "metrics_rebuild": "ok"},
            "reason": "no success for 3 periods: alerts",
        }
        assert client.get("/healthz", params={"strict": "true"}).status_code == 503
        jobruns.record_pass(session=session, job="alerts", period_s=30, now=utcnow())
        session.commit()
        r = client.get("/healthz", params={"strict": "true"})
        assert r.status_code == 200 and r.json() == {"status": "ok", "jobs": {"alerts": "ok", "metrics_rebuild": "ok"}}


def test_prometheus_exposes_each_jobs_last_success(session: Session, api_as: Callable[..., TestClient]) -> None:
    jobruns.record_pass(session=session, job="metrics_rebuild", period_s=30, now=T0)
    jobruns.record_pass(session=session, job="metrics_rebuild", period_s=30, now=T0 + dt.timedelta(seconds=30), error="x")
    jobruns.record_pass(session=session, job="retention", period_s=3600, now=T0, error="x")
    session.commit()
    text = api_as(scopes=["metrics"]).get("/-/metrics").text
    got = {
        (s.name, s.labels.get("job")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("draftdesk_job_")
    }
    assert got == {
        ("draftdesk_job_last_success_timestamp_seconds", "metrics_rebuild"): T0.timestamp(),
        ("draftdesk_job_last_success_timestamp_seconds", "retention"): 0.0,
        ("draftdesk_job_failures", "metrics_rebuild"): 1.0,
        ("draftdesk_job_failures", "retention"): 1.0,
    }
