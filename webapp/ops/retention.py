"""Retention: what is deleted, when, and why (run hourly by the server and by `draftdesk db prune`).

- Web sessions past their expiry: they can no longer sign anyone in.
- Sign-in attempts older than DRAFTDESK_LOGIN_ATTEMPT_RETENTION_DAYS (default 30): the limiter
  only reads the last DRAFTDESK_LOGIN_WINDOW_MINUTES; a month is kept to look into an attack.
- Alert outbox rows delivered (status "sent") more than DRAFTDESK_OUTBOX_RETENTION_DAYS ago
  (default 30). Pending and failed messages are never pruned: they still need attention. The
  ledger of notified transitions (alert_notice) is kept, so nothing is notified twice.
- Facts (webapp/core/facts.py) settled (every reaction done) more than DRAFTDESK_FACT_RETENTION_DAYS
  ago (default 30), with their reactions' marks: a settled fact is never read again except to look
  into what happened. A fact still waiting for a reaction (or failing) is never pruned.
- Production events of days before a cut-off day, DRAFTDESK_EVENT_RETENTION_DAYS before today in the
  spec's time zone; 0 (the default) keeps them forever. Whole days go (an event of the cut-off day
  is kept, so an event is kept at least that many days and at most one more): a day is either
  complete or closed. An event a review item or a hallucination report refers to is kept (it is
  the evidence of that decision). The daily aggregates are kept, so the metrics page's trends, the
  alerts and the gates still see those days; what is lost is the events themselves (drafts and
  messages, narrow segment breakdowns, the drill-down to single events).

Events (issue 33): before deleting any, the pass moves the retention watermark `pruned_before` to
its cut-off day and commits it (webapp/metrics/watermark.py). From then on no rebuild touches a
day before the watermark (`metrics rebuild` used to recompute pruned days from the few events left,
erasing their figures) and an event dated before it is refused at ingestion. Then the events go in
batches of at most PRUNE_BATCH_ROWS, each batch its own short transaction: one delete of a month
of events would hold SQLite's only write lock for seconds while graders save. An interrupted pass
leaves complete batches deleted and the watermark set, which is consistent: the next pass goes on.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy import delete, exists, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from webapp.alerts.models import AlertOutbox
from webapp.auth.models import LoginAttempt, WebSession
from webapp.core.config import Settings
from webapp.core.db import session_scope, table_of
from webapp.core.facts import Fact, FactReaction
from webapp.core.periodic import Record, every
from webapp.core.timeutil import utcnow
from webapp.metrics.models import Event, HallucinationReport
from webapp.metrics.watermark import advance_pruned_before, pruned_before
from webapp.reviews.models import ReviewItem

log = logging.getLogger(__name__)
# The job's name in job_run, /healthz and Prometheus.
JOB = "retention"

# How often the server prunes (the first pass runs at start-up).
PRUNE_INTERVAL_SECONDS = 3600.0


@dataclass(frozen=True)
class Retention:
    """Days to keep each kind of row (events: 0 = forever)."""

    login_attempt_days: int = 30
    outbox_days: int = 30
    event_days: int = 0
    fact_days: int = 30

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention:
        return cls(settings.login_attempt_retention_days, settings.outbox_retention_days, settings.event_retention_days,
                   settings.fact_retention_days)


@dataclass(frozen=True)
class PruneReport:
    """Rows deleted by one pass, by kind; the events' batches; the retention watermark after the pass."""

    sessions: int
    login_attempts: int
    outbox: int
    events: int
    event_batches: tuple[int, ...] = ()
    pruned_before: dt.date | None = None
    facts: int = 0


# Most events deleted per transaction: 0.12-0.18 s of SQLite's write lock per batch (60,000 events
# with 1 KB of texts each, measured on the 2-core development machine), instead of about a second
# for one delete of all 60,000 (1.06 s, measured alike).
PRUNE_BATCH_ROWS = 10_000


def _deleted(conn: Connection, statement: object) -> int:
    return int(conn.execute(statement).rowcount)  # type: ignore[call-overload]


def prune(*, session: Session, retention: Retention, now: dt.datetime | None = None) -> PruneReport:
    """Delete expired sessions, old sign-in attempts and delivered alert messages in the session's transaction (no events)."""
    now = now or utcnow()
    conn = session.connection()
    sessions = _deleted(conn, delete(WebSession).where(col(WebSession.expires_at) < now))
    attempts = _deleted(
        conn, delete(LoginAttempt).where(col(LoginAttempt.at) < now - dt.timedelta(days=retention.login_attempt_days))
    )
    outbox = _deleted(
        conn,
        delete(AlertOutbox).where(
            col(AlertOutbox.status) == "sent",
            col(AlertOutbox.sent_at) < now - dt.timedelta(days=retention.outbox_days),
        ),
    )
    # settled facts (every reaction done) past their retention, with their reactions' marks (the
    # foreign key cascades on PostgreSQL only: SQLite's are not enforced, so the marks go first)
    old = select(col(Fact.id)).where(col(Fact.settled).is_(True), col(Fact.created_at) < now - dt.timedelta(days=retention.fact_days))
    _deleted(conn, delete(FactReaction).where(col(FactReaction.fact_id).in_(old)))
    facts = _deleted(conn, delete(Fact).where(col(Fact.id).in_(old)))
    return PruneReport(sessions, attempts, outbox, 0, facts=facts)


def event_cutoff(*, retention: Retention, now: dt.datetime, tz: dt.tzinfo) -> dt.date | None:
    """Return the first day whose events are kept (None: events are kept forever)."""
    if retention.event_days <= 0:
        return None
    return (now - dt.timedelta(days=retention.event_days)).astimezone(tz).date()


def delete_event_batch(*, session: Session, before: dt.date, limit: int = PRUNE_BATCH_ROWS) -> int:
    """Delete at most `limit` events of days before `before` that no review or report cites; return how many."""
    event = table_of(Event)
    reviewed = exists(select(1).where(col(ReviewItem.event_id) == event.c.event_id))
    reported = exists(select(1).where(col(HallucinationReport.event_id) == event.c.event_id))
    batch = select(event.c.id).where(event.c.day < before, ~reviewed, ~reported).limit(limit)
    return _deleted(session.connection(), delete(event).where(event.c.id.in_(batch)))


def prune_database(
    engine: Engine,
    retention: Retention,
    *,
    tz: dt.tzinfo = dt.UTC,
    now: dt.datetime | None = None,
    batch: int = PRUNE_BATCH_ROWS,
) -> PruneReport:
    """Prune: the small tables and the watermark in one transaction, then the events a batch per transaction."""
    now = now or utcnow()
    cutoff = event_cutoff(retention=retention, now=now, tz=tz)
    with session_scope(engine) as session:
        small = prune(session=session, retention=retention, now=now)
        # committed before any event goes: from here on no rebuild reopens those days
        mark = advance_pruned_before(session=session, day=cutoff, now=now) if cutoff else pruned_before(session)
    batches: list[int] = []
    while cutoff is not None:
        with session_scope(engine) as session:
            n = delete_event_batch(session=session, before=cutoff, limit=batch)
        batches.append(n)
        if n < batch:
            break
    return PruneReport(
        small.sessions, small.login_attempts, small.outbox, sum(batches), tuple(b for b in batches if b), mark, small.facts
    )


def retention_line(mark: dt.date | None) -> str:
    """Say where the retention watermark stands, as `db prune` prints it."""
    if mark is None:
        return "retention watermark: none (no events pruned; every day can be rebuilt)"
    return (
        f"retention watermark: pruned_before {mark.isoformat()} (daily figures of earlier days are final; "
        "events dated before it are refused)"
    )


async def run(app: FastAPI, record: Record | None = None) -> None:
    """Prune at start-up and then every PRUNE_INTERVAL_SECONDS until cancelled (the deletes run in a thread).

    Several processes may prune at once: each delete is idempotent and the watermark only moves
    forward, so no lease is needed.
    """
    retention = Retention.from_settings(app.state.settings)

    def prune() -> None:
        log.info("retention: pruned %s", prune_database(app.state.engine, retention, tz=app.state.spec.tz))

    await every(PRUNE_INTERVAL_SECONDS, JOB, prune, record)
