"""The audit log for admins: a filterable, paginated page, its CSV export, and the JSON API (/api/v1/admin/audit).

The rows are written by webapp.auth.audit.record inside each action's own transaction; this
module only reads them. The page, the CSV and the JSON answer select with the same filter
(`AuditFilter`) through the same query (`audit.list_events`), so they never disagree.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from urllib.parse import urlencode

from fastapi import HTTPException
from pydantic import BaseModel, field_validator
from sqlmodel import Session

from webapp.auth import audit
from webapp.auth.audit import AUDIT_ACTIONS, AuditFilter, AuditRow
from webapp.core.csv_export import csv_text
from webapp.core.timeutil import as_utc

PER_PAGE = 50
CSV_COLUMNS = ("id", "at", "action", "actor", "credential", "subject", "target", "detail")


def audit_filter(
    *, actor: str = "", subject: str = "", action: str = "", start: dt.date | None = None, end: dt.date | None = None
) -> AuditFilter:
    """Return the filter of a request's query, refusing (422, naming the field) an unknown action or reversed dates."""
    if action and action not in AUDIT_ACTIONS:
        raise HTTPException(422, detail=[{"field": "action", "message": f"must be one of {', '.join(AUDIT_ACTIONS)}"}])
    if start is not None and end is not None and end < start:
        raise HTTPException(422, detail=[{"field": "end", "message": "must not be before start"}])
    return AuditFilter(actor=actor.strip(), subject=subject.strip(), action=action, start=start, end=end)


class AuditEventPublic(BaseModel):
    """One audit row as the JSON API gives it (the credential is a row id, never a secret)."""

    id: int
    at: dt.datetime
    action: str
    actor_id: int | None
    actor_email: str | None
    credential: str
    subject_id: int | None
    subject_email: str | None
    target: str
    detail: str

    @field_validator("at")
    @classmethod
    def _in_utc(cls, value: dt.datetime) -> dt.datetime:
        # SQLite hands the stored UTC time back naive; the API says it with its offset (RFC 3339 date-time)
        return as_utc(value)


class AuditPagePublic(BaseModel):
    """A page of the audit log, newest first, with the total that matches the filter."""

    events: list[AuditEventPublic]
    total: int
    page: int
    per_page: int


def event_public(row: AuditRow) -> AuditEventPublic:
    """Return the public form of an audit row."""
    data = row.event.model_dump() | {"actor_email": row.actor_email or None, "subject_email": row.subject_email or None}
    return AuditEventPublic.model_validate(data)


def audit_page_public(*, session: Session, where: AuditFilter, page: int) -> AuditPagePublic:
    """Return one page of the audit log as the JSON API answers it."""
    rows = audit.list_events(session=session, where=where, offset=(page - 1) * PER_PAGE, limit=PER_PAGE)
    total = audit.count_events(session=session, where=where)
    return AuditPagePublic(events=[event_public(r) for r in rows], total=total, page=page, per_page=PER_PAGE)


def audit_csv(*, session: Session, where: AuditFilter) -> str:
    """Return every audit row matching the filter as CSV, through the one writer that neutralises formulas."""
    rows = audit.list_events(session=session, where=where, limit=None)
    return csv_text(
        CSV_COLUMNS,
        (
            (r.event.id, r.event.at.isoformat(), r.event.action, r.actor_email or audit.COMMAND_LINE,
             r.event.credential, r.subject_email, r.event.target, r.event.detail)
            for r in rows
        ),
    )  # fmt: skip


@dataclass(frozen=True)
class AuditView:
    """/admin/audit: one page of the log, the filter that chose it, and the links to the pages around it."""

    rows: list[AuditRow]
    where: AuditFilter
    page: int
    pages: int
    total: int
    query: str  # the filter as a query string (for the page links and the CSV link)
    actions: tuple[str, ...] = AUDIT_ACTIONS
    command_line: str = audit.COMMAND_LINE


def audit_view(*, session: Session, where: AuditFilter, page: int) -> AuditView:
    """Build the audit page."""
    total = audit.count_events(session=session, where=where)
    rows = audit.list_events(session=session, where=where, offset=(page - 1) * PER_PAGE, limit=PER_PAGE)
    params = {
        "actor": where.actor, "subject": where.subject, "action": where.action,
        "start": where.start.isoformat() if where.start else "", "end": where.end.isoformat() if where.end else "",
    }  # fmt: skip
    query = urlencode({k: v for k, v in params.items() if v})
    return AuditView(rows=rows, where=where, page=page, pages=max(1, math.ceil(total / PER_PAGE)), total=total, query=query)
