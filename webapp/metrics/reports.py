"""Hallucination reports: an agent's flag of a factual error on an event, the lead's decision, and the lists that read them.

Only confirmed reports count in the daily metrics; the lead's queue (history, evidence, undo) is
webapp/metrics/hallucinations.py.
"""

from __future__ import annotations

import datetime as dt
from typing import TypedDict

from sqlalchemy import func, select
from sqlmodel import Session, col

from webapp.auth import audit
from webapp.metrics.daily import MetricsError
from webapp.metrics.models import Event, HallucinationDecision, HallucinationReport, HallucinationStatus


class Citation(TypedDict):
    """A KB article a reported draft cited, and the revision it cited (None: not known)."""

    article_id: str
    revision: int | None


def report_hallucination(
    *, session: Session, event_id: str, note: str, reported_by: int | None,
    citations: list[Citation] | None = None, minted_by: int | None = None,
) -> HallucinationReport:
    """Record an agent's flag of a factual error on an event (pending until the lead decides)."""
    event = session.execute(select(col(Event.id)).where(col(Event.event_id) == event_id)).first()
    if event is None:
        raise MetricsError(f"event_id: no event {event_id!r}")
    report = HallucinationReport(
        event_id=event_id, note=note.strip(), reported_by=reported_by, minted_by=minted_by, citations=[dict(c) for c in citations] if citations is not None else None
    )
    session.add(report)
    session.flush()
    return report


def decide_report(
    *, session: Session, report_id: int, decision: str, decided_by: int | None, note: str = ""
) -> HallucinationReport:
    """Confirm or dismiss a hallucination report with a note saying why; only confirmed reports count.

    Each decision is kept as a HallucinationDecision row (see webapp.metrics.hallucinations for the
    history and for undoing one).
    """
    if decision not in ("confirmed", "dismissed"):
        raise MetricsError(f"decision: must be confirmed or dismissed, not {decision!r}")
    if not note.strip():
        raise MetricsError(f"note: say why the report is {decision} (the note is kept with the decision)")
    report = session.get(HallucinationReport, report_id)
    if report is None:
        raise MetricsError(f"report: no hallucination report {report_id}")
    return apply_decision(session=session, report=report, decision=decision, decided_by=decided_by, note=note)


def apply_decision(
    *, session: Session, report: HallucinationReport, decision: HallucinationStatus, decided_by: int | None, note: str,
    undoes: int | None = None,
) -> HallucinationReport:
    """Record a decision row and make it the report's current state."""
    row = HallucinationDecision(
        report_id=_saved_id(report),
        decision=decision,
        note=note.strip(),
        decided_by=decided_by,
        undoes=undoes,
    )
    session.add(row)
    report.status = decision
    report.decided_at = None if decision == "pending" else row.decided_at
    report.decided_by = None if decision == "pending" else decided_by
    report.decision_note = "" if decision == "pending" else note.strip()
    session.add(report)
    session.flush()
    audit.record(
        session=session, action="hallucination.decide", actor_id=decided_by, subject_id=report.reported_by,
        target=f"report {report.id}", detail=decision,
    )  # fmt: skip
    return report


def _saved_id(report: HallucinationReport) -> int:
    if report.id is None:  # reports reach here from the database, so they have an id
        raise MetricsError("report: not saved yet")
    return report.id


def list_reports(*, session: Session, status: str | None = None) -> list[tuple[HallucinationReport, Event]]:
    """List hallucination reports with their events (pending first, then newest)."""
    stmt = select(HallucinationReport, Event).join(Event, col(Event.event_id) == HallucinationReport.event_id)
    if status:
        stmt = stmt.where(col(HallucinationReport.status) == status)
    stmt = stmt.order_by(col(HallucinationReport.status) != "pending", col(HallucinationReport.created_at).desc())
    return [(r, e) for r, e in session.execute(stmt).all()]


def pending_report_count(*, session: Session) -> int:
    """Return how many hallucination reports wait for the lead."""
    stmt = select(func.count()).select_from(HallucinationReport).where(col(HallucinationReport.status) == "pending")
    return int(session.execute(stmt).scalar_one())


def confirmed_hallucination_reports(*, session: Session, start: dt.date, end: dt.date) -> list[HallucinationReport]:
    """Return the confirmed hallucination reports on events of days [start, end] (spec time zone)."""
    stmt = (
        select(HallucinationReport)
        .join(Event, col(Event.event_id) == HallucinationReport.event_id)
        .where(col(HallucinationReport.status) == "confirmed", col(Event.day) >= start, col(Event.day) <= end)
        .order_by(col(Event.day), col(HallucinationReport.id))
    )
    return list(session.execute(stmt).scalars())
