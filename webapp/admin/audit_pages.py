"""The audit log's page and CSV export (admins only); the JSON API is in webapp/admin/routes.py."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, Response

from webapp.admin import audit as audit_views
from webapp.auth.service import Principal
from webapp.core.csv_export import csv_response
from webapp.core.db import SessionDep
from webapp.web.deps import require_role
from webapp.web.templating import render_view

router = APIRouter()
Admin = Annotated[Principal, Depends(require_role("admin"))]
Page = Annotated[int, Query(ge=1, le=1_000_000)]


@router.get("/admin/audit", response_class=HTMLResponse, name="admin_audit")
def admin_audit(
    request: Request, session: SessionDep, principal: Admin, actor: str = "", subject: str = "", action: str = "",
    start: dt.date | None = None, end: dt.date | None = None, page: Page = 1,
) -> HTMLResponse:
    """Show the audit log, newest first, filtered by actor, subject, action and dates, 50 rows a page."""
    where = audit_views.audit_filter(actor=actor, subject=subject, action=action, start=start, end=end)
    return render_view(request, "admin/audit.html", audit_views.audit_view(session=session, where=where, page=page))


@router.get("/admin/audit.csv", name="admin_audit_csv")
def admin_audit_csv(
    session: SessionDep, principal: Admin, actor: str = "", subject: str = "", action: str = "",
    start: dt.date | None = None, end: dt.date | None = None,
) -> Response:
    """Download every audit row the filter selects as CSV."""
    where = audit_views.audit_filter(actor=actor, subject=subject, action=action, start=start, end=end)
    return csv_response(audit_views.audit_csv(session=session, where=where), "audit-log.csv")
