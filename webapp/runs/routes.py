"""JSON API: runs and their drafts."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query

from webapp.app import flows
from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.runs import service
from webapp.runs.deps import RunDep
from webapp.runs.schemas import DraftPublic, RunDraftsPublic, RunPublic
from webapp.web.deps import ANY_ROLE, SpecDep, require_role

router = APIRouter(tags=["runs"])


@router.get("/runs", response_model=list[RunPublic])
def api_runs(session: SessionDep, principal: Principal = Depends(require_role(*ANY_ROLE))) -> list[RunPublic]:
    """List runs, newest first, with dataset and draft counts."""
    return [RunPublic.of(s) for s in service.list_runs(session=session)]


@router.get("/runs/{run}/drafts", response_model=RunDraftsPublic)
def api_run_drafts(
    session: SessionDep,
    spec: SpecDep,
    category: str = "",
    intent: str = Query("", description="The case's intent"),
    draft_intent: str = Query("", description="The intent the assistant predicted for the draft"),
    *,
    principal: Principal = Depends(require_role(*ANY_ROLE)),
    run: RunDep,
) -> RunDraftsPublic:
    """Return a run (by name or id) and its drafts (filtered by the case's category and intent, the draft's intent).

    Blind grading: a labeler gets no confidence (nor the raw output carrying it) for a draft they have not graded.
    """
    rows = service.list_drafts(
        session=session, run_id=stored_id(run.id), category=category, intent=intent, draft_intent=draft_intent
    )
    signals = flows.signals_view(session=session, spec=spec, principal=principal, run_id=stored_id(run.id))
    return RunDraftsPublic(
        run=RunPublic.of(service.run_row(session=session, run=run)),
        drafts=[DraftPublic.of(row.draft, row.case, signals_hidden=signals.hides(stored_id(row.draft.id))) for row in rows],
    )
