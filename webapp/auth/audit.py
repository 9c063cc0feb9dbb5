"""The audit log: who created which account, role and token, and who signed, graded, adjudicated or approved.

One function writes it, `record(...)`, called by the services that act (auth, admin, grading,
gates, metrics) inside the request's own transaction: the row commits with the action or not at
all. The credential comes from the database session: the principal dependency
(webapp.web.deps.optional_principal) leaves the caller on `session.info`, so a service that knows
only a user id still records "session 17" or "token 5" (never the secret); a service called with
no request behind it (the command line, the demo, a job) records "command line".

Rows are only ever added: on both databases a trigger refuses UPDATE and DELETE of `audit_event`
(created with the table by tests' create_all, and by migration 0025_audit). Decisions and reasons:
docs/security.md, "The audit log".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from sqlalchemy import DDL, event
from sqlmodel import Session, col, func, select

from webapp.auth.models import AuditEvent, User
from webapp.core.db import table_of

if TYPE_CHECKING:  # auth.service records through this module
    from webapp.auth.service import Principal

AuditAction = Literal[
    "user.create",
    "user.activate",
    "user.deactivate",
    "role.grant",
    "role.remove",
    "token.create",
    "token.revoke",
    "gate.sign",
    "grade.save",
    "grade.adjudicate",
    "reference.approve",
    "hallucination.decide",
]
AUDIT_ACTIONS: tuple[str, ...] = get_args(AuditAction)
PRINCIPAL_KEY = "draftdesk_principal"
COMMAND_LINE = "command line"

# The append-only rule, per database. SQLite: RAISE in a BEFORE trigger; PostgreSQL: a trigger function.
SQLITE_TRIGGERS = (
    "CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON audit_event "
    "BEGIN SELECT RAISE(ABORT, 'audit_event is append-only'); END",
    "CREATE TRIGGER audit_event_no_delete BEFORE DELETE ON audit_event "
    "BEGIN SELECT RAISE(ABORT, 'audit_event is append-only'); END",
)
POSTGRES_TRIGGERS = (
    "CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger LANGUAGE plpgsql AS "
    "$$ BEGIN RAISE EXCEPTION 'audit_event is append-only'; END $$",
    "CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_event "
    "FOR EACH ROW EXECUTE FUNCTION audit_event_append_only()",
)
for _ddl in SQLITE_TRIGGERS:
    event.listen(table_of(AuditEvent), "after_create", DDL(_ddl).execute_if(dialect="sqlite"))
for _ddl in POSTGRES_TRIGGERS:
    event.listen(table_of(AuditEvent), "after_create", DDL(_ddl).execute_if(dialect="postgresql"))


def remember_principal(*, session: Session, principal: Principal | None) -> None:
    """Leave the request's caller on its database session, for `record` to name the credential."""
    session.info[PRINCIPAL_KEY] = principal


def credential_of(principal: Principal | None) -> str:
    """Return how a caller authenticated, as the log shows it: "session 17", "token 5" or "command line"."""
    if principal is None or principal.credential_id is None:
        return COMMAND_LINE
    return f"{principal.via} {principal.credential_id}"


def record(
    *,
    session: Session,
    action: AuditAction,
    actor_id: int | None = None,
    subject_id: int | None = None,
    target: str = "",
    detail: str = "",
) -> AuditEvent:
    """Add one audit row in the caller's transaction; the actor defaults to the request's caller.

    The credential is the request's when the request's caller is the actor (a service acting for
    the signed-in user), else "command line" (no request, or a service acting for someone else).
    """
    principal: Principal | None = session.info.get(PRINCIPAL_KEY)
    if actor_id is None and principal is not None:
        actor_id = principal.user_id
    same = principal is not None and principal.user_id == actor_id
    row = AuditEvent(
        action=action,
        actor_id=actor_id,
        credential=credential_of(principal) if same else COMMAND_LINE,
        subject_id=subject_id,
        target=target[:200],
        detail=detail[:500],
    )
    session.add(row)
    session.flush()
    return row


@dataclass(frozen=True)
class AuditFilter:
    """What the audit page and export select: actor and subject by email (part of it), action, dates."""

    actor: str = ""
    subject: str = ""
    action: str = ""
    start: dt.date | None = None
    end: dt.date | None = None


@dataclass(frozen=True)
class AuditRow:
    """An audit row with the emails of its actor and subject ("" when none)."""

    event: AuditEvent
    actor_email: str
    subject_email: str


def _select(where: AuditFilter):  # noqa: ANN202 - a SQLAlchemy select of three columns
    actor = table_of(User).alias("actor")
    subject = table_of(User).alias("subject")
    stmt = (
        select(AuditEvent, actor.c.email, subject.c.email)
        .outerjoin(actor, actor.c.id == AuditEvent.actor_id)
        .outerjoin(subject, subject.c.id == AuditEvent.subject_id)
    )
    if where.actor:
        stmt = stmt.where(func.lower(actor.c.email).contains(where.actor.strip().lower(), autoescape=True))
    if where.subject:
        stmt = stmt.where(
            func.lower(subject.c.email).contains(where.subject.strip().lower(), autoescape=True)
        )
    if where.action:
        stmt = stmt.where(col(AuditEvent.action) == where.action)
    if where.start is not None:
        stmt = stmt.where(col(AuditEvent.at) >= dt.datetime.combine(where.start, dt.time(), dt.UTC))
    if where.end is not None:
        stmt = stmt.where(
            col(AuditEvent.at) < dt.datetime.combine(where.end + dt.timedelta(days=1), dt.time(), dt.UTC)
        )
    return stmt


def list_events(
    *, session: Session, where: AuditFilter, offset: int = 0, limit: int | None = 50
) -> list[AuditRow]:
    """Return the audit rows matching a filter, newest first, one page (`limit` None: all of them)."""
    stmt = _select(where).order_by(col(AuditEvent.id).desc()).offset(offset)
    if limit is not None:
        stmt = stmt.limit(limit)
    return [AuditRow(e, a or "", s or "") for e, a, s in session.exec(stmt).all()]


def count_events(*, session: Session, where: AuditFilter) -> int:
    """Count the audit rows matching a filter."""
    return session.exec(select(func.count()).select_from(_select(where).subquery())).one()


@dataclass(frozen=True)
class Provenance:
    """Who created an account and who granted it a role (None: the command line or before the audit log)."""

    created_by: int | None
    role_granted_by: int | None
    recorded: bool  # False: no audit row for the account (made before the log existed)


def provenance(*, session: Session, user_id: int, role: str) -> Provenance:
    """Return who created an account and who (last) granted it `role`, from the audit log."""
    rows = session.exec(
        select(AuditEvent)
        .where(AuditEvent.subject_id == user_id, col(AuditEvent.action).in_(("user.create", "role.grant")))
        .order_by(col(AuditEvent.id))
    ).all()
    created = next((r for r in rows if r.action == "user.create"), None)
    granted = [r for r in rows if r.action == "role.grant" and r.target == f"role {role}"]
    return Provenance(
        created_by=created.actor_id if created else None,
        role_granted_by=granted[-1].actor_id if granted else None,
        recorded=created is not None or bool(granted),
    )
