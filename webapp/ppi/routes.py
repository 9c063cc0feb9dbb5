"""JSON API: a run's sample for human grading, and its figures with 95% intervals."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from webapp.api_docs import error_response
from webapp.auth.service import Principal
from webapp.db import SessionDep, stored_id
from webapp.deps import SpecDep, require_role
from webapp.ppi import service
from webapp.ppi.report import run_report
from webapp.ppi.schemas import FurtherSampleIn, RunIntervalsPublic, SampleIn, SamplePublic
from webapp.ppi.views import report_view
from webapp.runs.deps import RunDep

router = APIRouter(tags=["ppi"])
# Labelers never see the judge's figures of a run they grade (blind grading).
VIEW_ROLES = ("lead", "pm", "support_lead", "ml_lead", "admin")  # ml_lead: reads the gate pages that link here, and judge health


@router.get("/ppi/runs/{run}", response_model=RunIntervalsPublic, responses={404: error_response("No such run, or the run has no sample")})
def api_run_intervals(
    session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES)), *, run: RunDep
) -> dict[str, Any]:
    """Return the run's rubric figures with 95% intervals (judge on every draft, people on the sample)."""
    report = run_report(session=session, spec=spec, run_id=stored_id(run.id))
    if report is None:
        raise HTTPException(status_code=404, detail="run: this run has no human-grading sample")
    return report_view(report, spec)


@router.post(
    "/ppi/runs/{run}/sample",
    status_code=201,
    response_model=SamplePublic,
    responses={422: error_response("Already sampled, already graded, or drafts without judge scores")},
)
def api_draw_sample(
    body: SampleIn, session: SessionDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> dict[str, Any]:
    """Draw the run's human-grading sample before any grade (pi, draws and seed stored, append-only)."""
    try:
        summary = service.draw_sample(
            session=session, run_id=stored_id(run.id), budget=body.budget, judge_version=body.judge_version, seed=body.seed
        )
    except service.PpiError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return dataclasses.asdict(summary)


@router.post(
    "/ppi/runs/{run}/further-sample",
    status_code=201,
    response_model=SamplePublic,
    responses={422: error_response("The run has no sample yet")},
)
def api_draw_further_sample(
    body: FurtherSampleIn, session: SessionDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> dict[str, Any]:
    """Draw a further sample to settle an undecided gate (combined pi = 1 - (1 - pi1)(1 - pi2))."""
    try:
        summary = service.draw_further_sample(session=session, run_id=stored_id(run.id), budget=body.budget, seed=body.seed)
    except service.PpiError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return dataclasses.asdict(summary)
