"""Pages of the automated checks: a run's results with a Re-check button, and one draft's results."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from webapp.auth.service import Principal
from webapp.checks import hooks, service
from webapp.checks.draft_checks import draft_results
from webapp.checks.routes import RECHECK_ROLES
from webapp.checks.views import DraftChecksView, RunChecksView, recheck_notice
from webapp.core.db import SessionDep, stored_id
from webapp.runs import hooks as runs_hooks
from webapp.runs.deps import RunDep
from webapp.runs.service import DraftNotFound
from webapp.web.deps import ANY_ROLE, SpecDep, require_role
from webapp.web.templating import is_htmx, render_view

router = APIRouter()
# Who may add a failing draft's case to the regression suite (its from-draft form's roles).
ADD_CASE_ROLES = ("lead", "pm", "labeler")


@router.get("/runs/{run}/checks", response_class=HTMLResponse, name="run_checks")
def run_checks_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    *, principal: Principal = Depends(require_role(*ANY_ROLE)), run: RunDep,
) -> HTMLResponse:
    """Show a run's pass rates overall, per check, per category and per intent, and its failing drafts."""
    summary = service.run_summary(session=session, run_id=stored_id(run.id))
    signals = runs_hooks.signals_view(session=session, spec=spec, principal=principal, run_id=summary.run_id)
    seen = service.summary_for_viewer(summary, signals)  # a blind grader's figures: the drafts they graded
    view = RunChecksView(
        run=run,
        s=seen,
        gate=hooks.ci_verdict(session=session, spec=spec, summary=summary, signals=signals),
        can_recheck=principal.has_role(*RECHECK_ROLES),
        can_add_case=principal.has_role(*ADD_CASE_ROLES),
        flash=recheck_notice(summary, bool(request.query_params.get("rechecked"))),
    )
    return render_view(request, "checks/run.html", view, block="results")


@router.post("/runs/{run}/checks", name="run_recheck")
def run_recheck(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    *, principal: Principal = Depends(require_role(*RECHECK_ROLES)), run: RunDep,
) -> Response:
    """Re-check a run against the KB as it is now, then show its results again."""
    service.check_run(session=session, spec=spec, run_id=stored_id(run.id))  # its fact: the run's alerts follow the commit
    target = f"/runs/{run.id}/checks?rechecked=1"
    if is_htmx(request):
        # The results block listens for this event and reloads itself; alerts lists do too.
        return Response(status_code=204, headers={"HX-Trigger": "checks-updated"})
    return RedirectResponse(target, status_code=303)


@router.get("/drafts/{draft_id}/checks", response_class=HTMLResponse, name="draft_checks")
def draft_checks_page(
    request: Request,
    draft_id: int,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*ANY_ROLE)),
) -> HTMLResponse:
    """Show one draft's check results with reasons (a fragment for htmx, a page without JS; hidden from a blind grader)."""
    try:
        d = draft_results(session=session, draft_id=draft_id)
    except DraftNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    hidden = runs_hooks.signals_view(session=session, spec=spec, principal=principal, draft_ids=[draft_id]).hides(draft_id)
    view = DraftChecksView(d=d, hidden=hidden, can_add_case=principal.has_role(*ADD_CASE_ROLES))
    return render_view(request, "checks/draft.html", view, block="results")
