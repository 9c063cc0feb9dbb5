"""The admin's JSON API: the audit log (GET /api/v1/admin/audit)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import APIRouter, Depends, Query

from webapp.admin import audit as audit_views
from webapp.admin.audit import AuditPagePublic
from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.api_docs import error_response
from webapp.web.deps import require_role

router = APIRouter(tags=["admin"])


@router.get(
    "/admin/audit",
    response_model=AuditPagePublic,
    summary="Read the audit log",
    description=(
        "An admin (or an auditor's script with an admin's token) reads who created which account, granted "
        "or removed which role, minted or revoked which token, signed a gate, graded, adjudicated, approved "
        "a reference or decided a hallucination report, with the session or token used: newest first, 50 "
        "rows a page, filtered by actor, subject, action and dates. Rows are only ever added."
    ),
    responses={422: error_response("An unknown action, reversed dates or a page out of range")},
)
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
