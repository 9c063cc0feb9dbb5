"""JSON API: runs and their drafts."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from webapp.auth.service import Principal
from webapp.db import SessionDep, stored_id
from webapp.deps import ANY_ROLE, require_role
from webapp.runs import service
from webapp.runs.schemas import RunDraftsPublic, RunPublic

router = APIRouter(tags=["runs"])


@router.get("/runs", response_model=list[RunPublic])
def api_runs(session: SessionDep, principal: Principal = Depends(require_role(*ANY_ROLE))) -> list[dict[str, Any]]:
    """List runs, newest first, with dataset and draft counts."""
    return [service.run_public(s) for s in service.list_runs(session=session)]


@router.get("/runs/{run}/drafts", response_model=RunDraftsPublic)
def api_run_drafts(
    run: str, session: SessionDep, category: str = "", principal: Principal = Depends(require_role(*ANY_ROLE))
) -> dict[str, Any]:
    """Return a run (by name or id) and every draft of it: id, case id and all fields."""
    try:
        r = service.resolve_run(session=session, ref=run)
    except service.RunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    rows = service.list_drafts(session=session, run_id=stored_id(r.id), category=category)
    return {
        "run": service.run_public(service.run_summary(session=session, run=r)),
        "drafts": [service.draft_public(row.draft, row.case) for row in rows],
    }
