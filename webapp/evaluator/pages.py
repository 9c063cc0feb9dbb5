"""Page of a recorded prompt-evaluator run: its statistics, judge scores and agreement.

The list of runs (/evaluator/runs) is in webapp/ppi/pages.py: it also lists the runs the PPI judge
scored, and ppi sits above evaluator in the layers (docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.evaluator import report, service
from webapp.evaluator.report import EvaluatorReport
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import render_view

router = APIRouter()


@dataclass(frozen=True)
class EvaluatorRunView:
    """A recorded run's page: its report (the template calls it `r`)."""

    r: EvaluatorReport
VIEW_ROLES = ("lead", "pm", "ml_lead", "admin")


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
        view = report.evaluator_report(session=session, spec=spec, ref=run_id, principal=principal)
    except service.EvaluatorRunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render_view(request, "evaluator/run.html", EvaluatorRunView(r=view))
