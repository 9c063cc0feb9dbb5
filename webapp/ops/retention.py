"""Retention: what is deleted, when, and why (run hourly by the server and by `draftdesk db prune`).

- Web sessions past their expiry: they can no longer sign anyone in.
- Sign-in attempts older than DRAFTDESK_LOGIN_ATTEMPT_RETENTION_DAYS (default 30): the limiter
  only reads the last DRAFTDESK_LOGIN_WINDOW_MINUTES; a month is kept to look into an attack.
- Alert outbox rows delivered (status "sent") more than DRAFTDESK_OUTBOX_RETENTION_DAYS ago
  (default 30). Pending and failed messages are never pruned: they still need attention. The
  ledger of notified transitions (alert_notice) is kept, so nothing is notified twice.
- Production events that occurred more than DRAFTDESK_EVENT_RETENTION_DAYS ago; 0 (the default)
  keeps them forever. An event a review item or a hallucination report refers to is kept (it is
  the evidence of that decision). The daily aggregates are kept, so the metrics page's trends and
  the gates still see those days; what is lost is the events themselves (drafts and messages,
  narrow segment breakdowns, the drill-down to single events). A later `metrics rebuild` of a
  pruned day would recompute it from the events that remain.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, exists, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from webapp.alerts.models import AlertOutbox
from webapp.auth.models import LoginAttempt, WebSession
from webapp.config import Settings
from webapp.db import session_scope, table_of
from webapp.metrics.models import Event, HallucinationReport
from webapp.reviews.models import ReviewItem
from webapp.timeutil import utcnow

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

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention:
        return cls(settings.login_attempt_retention_days, settings.outbox_retention_days, settings.event_retention_days)


@dataclass(frozen=True)
class PruneReport:
    """Rows deleted by one pass, by kind."""

    sessions: int
    login_attempts: int
    outbox: int
    events: int


def _deleted(conn: Connection, statement: object) -> int:
    return int(conn.execute(statement).rowcount)  # type: ignore[call-overload]


def prune(*, session: Session, retention: Retention, now: dt.datetime | None = None) -> PruneReport:
    """Delete what the retention rules allow, in the session's transaction; return the counts."""
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
    events = 0
    if retention.event_days > 0:
        event = table_of(Event)
        reviewed = exists(select(1).where(col(ReviewItem.event_id) == event.c.event_id))
        reported = exists(select(1).where(col(HallucinationReport.event_id) == event.c.event_id))
        events = _deleted(
            conn,
            delete(event).where(
                event.c.occurred_at < now - dt.timedelta(days=retention.event_days), ~reviewed, ~reported
            ),
        )
    return PruneReport(sessions, attempts, outbox, events)


def prune_database(engine: Engine, retention: Retention) -> PruneReport:
    """Prune in one transaction of its own."""
    with session_scope(engine) as session:
        return prune(session=session, retention=retention)


async def run(app: Any, record: Callable[[str, float, BaseException | None], None] | None = None) -> None:
    """Prune at start-up and then every PRUNE_INTERVAL_SECONDS until cancelled (the deletes run in a thread).

    Several processes may prune at once: each delete is idempotent, so no lease is needed.
    """
    retention = Retention.from_settings(app.state.settings)
    while True:
        error: BaseException | None = None
        try:
            report = await asyncio.to_thread(prune_database, app.state.engine, retention)
            log.info("retention: pruned %s", report)
        except Exception as exc:
            error = exc
            log.exception("retention: pruning failed; trying again in %s s", PRUNE_INTERVAL_SECONDS)
        if record is not None:  # webapp/jobs.py stores how the pass went (job_run)
            await asyncio.to_thread(record, JOB, PRUNE_INTERVAL_SECONDS, error)
        await asyncio.sleep(PRUNE_INTERVAL_SECONDS)
