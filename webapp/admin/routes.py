"""The admin's JSON API: the audit log (GET /api/v1/admin/audit)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from webapp.admin import audit as audit_views
from webapp.admin.audit import AuditPagePublic
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.deps import require_role

router = APIRouter(tags=["admin"])


@router.get("/admin/audit", response_model=AuditPagePublic, responses={422: {"description": "an unknown action or reversed dates"}})
def audit_log(
    session: SessionDep,
    principal: Annotated[Principal, Depends(require_role("admin"))],
    actor: str = "", subject: str = "", action: str = "",
    start: dt.date | None = None, end: dt.date | None = None,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> AuditPagePublic:
    """List the audit log, newest first, 50 rows a page: who did what, with which credential, on whom."""
    where = audit_views.audit_filter(actor=actor, subject=subject, action=action, start=start, end=end)
    return audit_views.audit_page_public(session=session, where=where, page=page)
