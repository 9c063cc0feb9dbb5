"""JSON API of recorded prompt-evaluator runs (the same report as the run page, with the same blind rule)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.evaluator import report, service
from webapp.evaluator.pages import VIEW_ROLES
from webapp.evaluator.schemas import EvaluatorReportPublic, report_public
from webapp.web.deps import SpecDep, require_role

router = APIRouter(tags=["evaluator"])


@router.get(
    "/evaluator/runs/{run_id}",
    summary="Read a prompt-evaluator run",
    description=(
        "The ML lead, the PM and leads read a recorded evaluator run: statistics, variance warnings, "
        "judge scores and the judge's agreement with final grades."
    ),
    response_model=EvaluatorReportPublic,
)
def evaluator_run_json(
    run_id: str, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES))
) -> EvaluatorReportPublic:
    """Return a recorded run's statistics, variance warnings, judge scores and judge-human agreement."""
    try:
        r = report.evaluator_report(session=session, spec=spec, ref=run_id, principal=principal)
    except service.EvaluatorRunNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return report_public(r)
