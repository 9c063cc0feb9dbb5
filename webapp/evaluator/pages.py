"""Pages of recorded prompt-evaluator runs: the list, and a run's statistics, judge scores and agreement."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.db import SessionDep
from webapp.deps import SpecDep, require_role
from webapp.evaluator import service
from webapp.ppi import report as ppi_report
from webapp.templating import render

router = APIRouter()
VIEW_ROLES = ("lead", "pm", "ml_lead", "admin")


@router.get("/evaluator/runs", response_class=HTMLResponse, name="evaluator_runs")
def evaluator_runs(
    request: Request, session: SessionDep, principal: Principal = Depends(require_role(*VIEW_ROLES))
) -> HTMLResponse:
    """List the runs recorded by prompt-evaluator --record, and the Draft Desk runs the PPI judge scored (links to their intervals)."""
    ctx = {"runs": service.list_evaluator_runs(session=session), "judge_runs": ppi_report.judge_runs(session=session)}
    return render(request, "evaluator/list.html", ctx)


@router.get("/evaluator/runs/{run_id}", response_class=HTMLResponse, name="evaluator_run")
def evaluator_run(
    request: Request,
    run_id: str,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role(*VIEW_ROLES)),
) -> HTMLResponse:
    """Show a recorded run: per-case statistics, variance warnings, judge scores, judge-human agreement."""
    try:
        report = service.evaluator_report(session=session, spec=spec, ref=run_id, principal=principal)
    except service.EvaluatorRunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render(request, "evaluator/run.html", {"r": report})
