"""Retention: each rule deletes exactly the rows counted by hand below, on both databases."""

from __future__ import annotations

import datetime as dt

from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from typer.testing import CliRunner

from tests.conftest import SPEC_PATH, TEST_SECRET
from tests.factories import make_user
from tests.waiting import wait_for
from webapp.alerts.models import AlertChannel, AlertOutbox
from webapp.app import cli
from webapp.app.main import create_app
from webapp.auth.models import LoginAttempt, WebSession
from webapp.core.config import Settings
from webapp.core.db import stored_id
from webapp.metrics.models import Event, HallucinationReport
from webapp.ops.retention import Retention, prune_database
from webapp.reviews.models import ReviewItem, ReviewSample

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def days_ago(n: float) -> dt.datetime:
    return NOW - dt.timedelta(days=n)


def seed(session: Session) -> None:
    """Rows on both sides of each rule; the comments say which ones each rule deletes."""
    user = make_user(session, email="u@example.test", roles=["admin"])
    uid = stored_id(user.id)
    # Sessions: 2 expired (deleted), 1 live.
    for i, expires in enumerate([days_ago(1), NOW - dt.timedelta(seconds=1), NOW + dt.timedelta(hours=1)]):
        session.add(WebSession(token_hash=f"{i:064d}", user_id=uid, expires_at=expires))
    # Sign-in attempts, 30 days kept: 3 older (deleted), 2 younger.
    for i, age in enumerate([31, 30.01, 400, 29.99, 0]):
        session.add(LoginAttempt(email=f"a{i}@example.test", ip="10.0.0.1", success=False, at=days_ago(age)))
    # Outbox, 30 days kept: sent 31 and 45 days ago (deleted); sent 29 days ago; pending and failed
    # from 60 days ago (never pruned).
    channel = AlertChannel(name="file", kind="file", target="/dev/null")
    session.add(channel)
    session.flush()
    cid = stored_id(channel.id)
    rows = [("sent", days_ago(31)), ("sent", days_ago(45)), ("sent", days_ago(29)), ("pending", None), ("failed", None)]
    for i, (status, sent) in enumerate(rows):
        outbox = AlertOutbox(channel_id=cid, idempotency_key=f"k{i}", status=status, sent_at=sent)
        outbox.created_at = outbox.next_attempt_at = days_ago(60)
        session.add(outbox)
    # Events, with 10 days kept: e-old-1 and e-old-2 (deleted); e-old-reviewed and e-old-reported
    # are as old but referred to (kept); e-new is 9 days old (kept).
    for event_id, age in [("e-old-1", 11), ("e-old-2", 300), ("e-old-reviewed", 50), ("e-old-reported", 50), ("e-new", 9)]:
        at = days_ago(age)
        session.add(Event(event_id=event_id, ticket_id="t", occurred_at=at, day=at.date(), draft_shown=True, escalated=False))
    session.flush()
    sample = ReviewSample(period="2026-W40", cadence="weekly", start=dt.date(2026, 9, 28), end=dt.date(2026, 10, 4), wanted=1, candidates=1, seed="s")
    session.add(sample)
    session.flush()
    session.add(ReviewItem(sample_id=stored_id(sample.id), position=0, event_id="e-old-reviewed"))
    session.add(HallucinationReport(event_id="e-old-reported", note="wrong price"))
    session.commit()


def remaining(session: Session) -> dict[str, list[str]]:
    return {
        "sessions": sorted(s.token_hash[-1] for s in session.exec(select(WebSession))),
        "attempts": sorted(a.email for a in session.exec(select(LoginAttempt))),
        "outbox": sorted(o.idempotency_key for o in session.exec(select(AlertOutbox))),
        "events": sorted(e.event_id for e in session.exec(select(Event))),
    }


def test_each_rule_deletes_what_it_should_and_nothing_else(session: Session, engine: Engine) -> None:
    seed(session)
    # By default events are kept forever.
    assert Settings(mode="dev").event_retention_days == 0
    report = prune_database(engine, Retention(), now=NOW)
    assert (report.sessions, report.login_attempts, report.outbox, report.events) == (2, 3, 2, 0)
    assert report.pruned_before is None
    assert len(remaining(session)["events"]) == 5
    session.rollback()
    report = prune_database(engine, Retention(login_attempt_days=30, outbox_days=30, event_days=10), now=NOW)
    assert (report.sessions, report.login_attempts, report.outbox, report.events) == (0, 0, 0, 2)
    assert report.pruned_before == dt.date(2026, 11, 17)  # 10 days before NOW's day (UTC)
    assert remaining(session) == {
        "sessions": ["2"],
        "attempts": ["a3@example.test", "a4@example.test"],
        "outbox": ["k2", "k3", "k4"],
        "events": ["e-new", "e-old-reported", "e-old-reviewed"],
    }
    session.rollback()
    # A second pass finds nothing more.
    again = prune_database(engine, Retention(event_days=10), now=NOW)
    assert (again.sessions, again.login_attempts, again.outbox, again.events) == (0, 0, 0, 0)


def test_db_prune_command_uses_the_settings(session: Session, db_url: str) -> None:
    seed(session)
    # The command prunes at the real clock: move the rows relative to now.
    shift = dt.datetime.now(dt.UTC) - NOW
    for model, field in ((WebSession, "expires_at"), (LoginAttempt, "at"), (AlertOutbox, "sent_at"), (Event, "occurred_at")):
        for row in session.exec(select(model)):
            if getattr(row, field) is not None:
                setattr(row, field, getattr(row, field) + shift)
    for event in session.exec(select(Event)):
        event.day = event.occurred_at.astimezone(dt.UTC).date()  # the spec's time zone is UTC
    session.commit()
    env = {"DRAFTDESK_DATABASE_URL": db_url, "DRAFTDESK_EVENT_RETENTION_DAYS": "10", "DRAFTDESK_OUTBOX_RETENTION_DAYS": "40"}
    out = CliRunner().invoke(cli.app, ["db", "prune"], env=env)
    assert out.exit_code == 0, out.output
    # outbox kept 40 days: only the one sent 45 days ago goes.
    printed = " ".join(out.output.split())
    assert "pruned 2 expired sessions, 3 sign-in attempts, 1 delivered alert messages, 2 events" in printed
    # and where the retention watermark stands: 10 days before today
    cutoff = (dt.datetime.now(dt.UTC) - dt.timedelta(days=10)).date()
    assert f"retention watermark: pruned_before {cutoff.isoformat()}" in printed


def test_the_server_prunes_at_start_up_when_background_jobs_run(session: Session, db_url: str) -> None:
    """The retention job starts with the app's lifespan (as the alert jobs do) and prunes at once."""
    user = make_user(session, email="u@example.test", roles=["admin"])
    session.add(WebSession(token_hash="e" * 64, user_id=stored_id(user.id), expires_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)))
    session.add(WebSession(token_hash="l" * 64, user_id=stored_id(user.id), expires_at=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)))
    session.commit()
    settings = Settings(
        database_url=db_url, mode="dev", secret_key=TEST_SECRET, spec=SPEC_PATH, background_jobs=True, alerts_interval_seconds=3600
    )
    app = create_app(settings)
    try:
        with TestClient(app):
            left: list[str] = []

            def only_the_live_session_left() -> bool:
                session.expire_all()
                left[:] = [s.token_hash[0] for s in session.exec(select(WebSession))]
                session.rollback()  # end the read, so SQLite's writer is not kept waiting
                return left == ["l"]

            wait_for(only_the_live_session_left, timeout=30, what="the expired session to be purged", interval=0.05)
    finally:
        app.state.engine.dispose()
    assert left == ["l"]


def test_settled_facts_past_their_retention_are_pruned_with_their_marks(engine: Engine, session: Session) -> None:
    """Facts whose reactions are all done go after fact_days; an unsettled one (waiting or failing) never."""
    from webapp.core.facts import Fact, FactReaction
    from webapp.ops.retention import prune

    rows = [("old settled", days_ago(31), True), ("old pending", days_ago(90), False), ("young settled", days_ago(29), True)]
    ids = {}
    for label, at, settled in rows:
        fact = Fact(name="run_checked", subject={"run_id": 1}, created_at=at, settled=settled)
        session.add(fact)
        session.flush()
        ids[label] = stored_id(fact.id)
        session.add(FactReaction(fact_id=ids[label], reaction="r", state="done" if settled else "failed"))
    session.commit()
    report = prune(session=session, retention=Retention(fact_days=30), now=NOW)
    session.commit()
    assert report.facts == 1
    assert sorted(stored_id(f.id) for f in session.exec(select(Fact))) == sorted([ids["old pending"], ids["young settled"]])
    assert sorted(r.fact_id for r in session.exec(select(FactReaction))) == sorted([ids["old pending"], ids["young settled"]])
