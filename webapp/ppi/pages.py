"""Page: a run's rubric figures with 95% intervals, judge health, gate calls, and a further sample."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.evaluator import service as evaluator_service
from webapp.evaluator.pages import VIEW_ROLES as EVALUATOR_VIEW_ROLES
from webapp.ppi import service
from webapp.ppi.report import judge_runs, run_report
from webapp.ppi.routes import VIEW_ROLES
from webapp.ppi.views import report_view
from webapp.runs.deps import RunDep
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import render

router = APIRouter()


@router.get("/evaluator/runs", response_class=HTMLResponse, name="evaluator_runs")
def evaluator_runs(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*EVALUATOR_VIEW_ROLES))
) -> HTMLResponse:
    """List the runs recorded by prompt-evaluator --record, and the Draft Desk runs the PPI judge scored (links to their intervals).

    Here rather than in webapp/evaluator/pages.py: the page shows both domains' runs, and only ppi
    (above evaluator in the layers) may read both.
    """
    ctx = {"runs": evaluator_service.list_evaluator_runs(session=session), "judge_runs": judge_runs(session=session)}
    return render(request, "evaluator/list.html", ctx)


@router.get("/ppi/runs/{run}", response_class=HTMLResponse)
def ppi_run_page(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES)), *, run: RunDep
) -> HTMLResponse:
    """Show a run's figures: estimate [95% interval], the judge alone, human grades, gate calls and judge health."""
    report = run_report(session=session, spec=spec, run_id=stored_id(run.id))
    return consume_flash(request, render(
        request,
        "ppi/run.html",
        {
            "run": run,
            "r": None if report is None else report_view(report, spec),
            "can_sample": principal.has_role("lead"),
            "error": flash_context(request)["error"],
        },
    ))


@router.post("/ppi/runs/{run}/further-sample")
def ppi_further_sample(
    request: Request,
    session: SessionDep,
    budget: Annotated[float, Form(gt=0, allow_inf_nan=False)],
    principal: Principal = Depends(require_role("lead")),
    *,
    run: RunDep,
) -> Response:
    """Draw a further sample of the run to settle an undecided gate, then show the page again."""
    target = f"/ppi/runs/{quote(run.name)}"
    try:
        service.draw_further_sample(session=session, run_id=stored_id(run.id), budget=budget)
    except service.PpiError as exc:
        return redirect_with_flash(request, target, text=str(exc), kind="error")
    return RedirectResponse(target, status_code=303)
