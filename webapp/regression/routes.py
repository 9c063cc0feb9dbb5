"""JSON API of the regression suite, run comparison, baselines and regression alerts."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel, Field

from webapp.auth.service import Principal
from webapp.core.csv_export import csv_response
from webapp.core.db import SessionDep, stored_id
from webapp.regression import alerts, comparison, hooks, service
from webapp.regression.models import RegressionCase
from webapp.regression.public import alert_public, comparison_public, reading_public, suite_report_public
from webapp.regression.schemas import (
    AddedCasePublic,
    BaselinePublic,
    CaseFilters,
    ComparisonPublic,
    RegressionAlertPublic,
    RegressionAlertsPublic,
    RegressionCasePublic,
    SuitePublic,
    SuiteReportPublic,
)
from webapp.runs.deps import RunDep, run_or_404
from webapp.runs.models import Run
from webapp.web.api_docs import error_response
from webapp.web.deps import SpecDep, require_role

router = APIRouter(tags=["regression"])

READ_ROLES = ("lead", "pm", "admin", "support_lead", "ml_lead")
ADD_ROLES = ("lead", "pm", "labeler")
BASELINE_ROLES = ("lead", "pm", "admin")
ACK_ROLES = ("lead", "pm")


def case_public(case: RegressionCase) -> RegressionCasePublic:
    """Return a regression case as JSON."""
    return RegressionCasePublic.of(case)


@router.get(
    "/regression/cases",
    summary="List the regression suite",
    description=(
        "Anyone on the team reads the regression suite (cases added from real failures, never edited or "
        "removed) and its progress towards the plan's target size."
    ),
)
def get_cases(
    session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*READ_ROLES, "labeler"))
) -> SuitePublic:
    """List the regression suite and its progress towards the target size."""
    cases = service.list_cases(session=session)
    return SuitePublic(count=len(cases), target=spec.regression.target_cases, cases=[case_public(c) for c in cases])


class FromDraftIn(BaseModel):
    """Add the case of a failing draft to the suite."""

    draft_id: int
    note: str = Field(min_length=1, max_length=4000)
    source: Literal["run", "grading", "review"] = "run"


@router.post(
    "/regression/cases",
    summary="Add a draft's case to the regression suite",
    description=(
        "A labeler, lead or the PM adds the case behind a failing draft to the regression suite, so every "
        "later run is held to it. A case already in the suite is 409."
    ),
    status_code=201,
    responses={409: error_response("The case is already in the regression suite")},
)
def post_case(
    body: FromDraftIn, session: SessionDep, principal: Principal = Depends(require_role(*ADD_ROLES))
) -> AddedCasePublic:
    """Append the case of a draft to the regression suite (cases are never edited or removed)."""
    try:
        case = service.add_case_from_draft(
            session=session, draft_id=body.draft_id, created_by=principal.user_id, note=body.note, source=body.source
        )
    except service.RegressionError as exc:
        raise HTTPException(status_code=409 if "already" in str(exc) else 422, detail=str(exc)) from None
    # Said at the moment of adding: the pilot gate of every run without this case stays incomplete.
    notice = service.inclusion_notice(session=session, case_id=case.case_id)
    return AddedCasePublic(**dict(case_public(case)), next_run=notice)


def csv_download(body: str, filename: str) -> Response:
    """Return CSV text as a download (run names in `filename` are made safe by webapp.core.csv_export)."""
    return csv_response(body, filename)


@router.get(
    "/runs/compare",
    summary="Compare two runs case by case",
    description=(
        "The PM and the ML lead (and leads, the support lead, the admin) compare a candidate run with its "
        "baseline over the same dataset before deploy: per-check and rubric deltas with a noise test; "
        "`format=csv` downloads the cases."
    ),
    response_model=ComparisonPublic,
    responses={
        200: {"description": "The comparison (JSON), or its per-case table with format=csv", "content": {"text/csv": {"schema": {"type": "string"}}}},
        404: error_response("No run with that name or id"),
    },
)
def get_compare(
    session: SessionDep,
    spec: SpecDep,
    filters: Annotated[CaseFilters, Query()],
    principal: Principal = Depends(require_role(*READ_ROLES)),
) -> ComparisonPublic | Response:
    """Compare two runs over the same dataset case by case (filters select the cases; format=csv for CSV)."""
    if not filters.a or not filters.b:
        raise HTTPException(status_code=422, detail="a, b: name the two runs to compare")
    ra, rb = run_or_404(session, filters.a), run_or_404(session, filters.b)
    try:
        cmp = comparison.compare_runs(session=session, spec=spec, a_id=stored_id(ra.id), b_id=stored_id(rb.id))
    except service.NotComparable as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    rows = cmp.filtered(**filters.case_filters())
    if filters.format == "csv":
        return csv_download(cmp.to_csv(rows), f"compare-{cmp.a.run_name}-{cmp.b.run_name}.csv")
    return comparison_public(cmp, rows)


@router.get(
    "/runs/{run}/regression",
    summary="Read a run's regression suite result",
    description=(
        "The PM, the ML lead and leads read how a run does on each regression case (pass, fail, not run, "
        "not checked) before it is deployed."
    ),
)
def get_run_regression(
    session: SessionDep, *, principal: Principal = Depends(require_role(*READ_ROLES)), run: RunDep
) -> SuiteReportPublic:
    """Return the regression suite's result for a run, case by case."""
    return suite_report_public(service.suite_report(session=session, run_id=stored_id(run.id)))


@router.post(
    "/runs/{run}/baseline",
    summary="Make a run its dataset's baseline",
    description=(
        "A lead, the PM or the admin marks the run new candidates are compared with (the previous "
        "baseline of the dataset stops being one)."
    ),
)
def post_baseline(
    session: SessionDep, *, principal: Principal = Depends(require_role(*BASELINE_ROLES)), run: RunDep
) -> BaselinePublic:
    """Make a run the baseline of its dataset (the previous baseline stops being one)."""
    r = service.mark_baseline(session=session, run_id=stored_id(run.id))
    return BaselinePublic(run=r.name, is_baseline=r.is_baseline)


@router.delete(
    "/runs/{run}/baseline",
    summary="Stop a run being the baseline",
    description="A lead, the PM or the admin unmarks a baseline, e.g. one marked by mistake.",
)
def delete_baseline(
    session: SessionDep, *, principal: Principal = Depends(require_role(*BASELINE_ROLES)), run: RunDep
) -> BaselinePublic:
    """Stop a run being the baseline."""
    r = service.unmark_baseline(session=session, run_id=stored_id(run.id))
    return BaselinePublic(run=r.name, is_baseline=r.is_baseline)


@router.get(
    "/regression/alerts",
    summary="List the regression alerts",
    description=(
        "The PM, the ML lead, leads and the support lead read the regression alerts, newest first "
        "(`open=true`: only unacknowledged), with the sampled pass-rate readings behind them."
    ),
)
def get_alerts(
    session: SessionDep,
    spec: SpecDep,
    open_only: bool = Query(False, alias="open"),
    principal: Principal = Depends(require_role(*READ_ROLES)),
) -> RegressionAlertsPublic:
    """List regression alerts, newest first (`?open=true`: only unacknowledged), and the sampled pass-rate readings."""
    rows = alerts.list_alerts(session=session, open_only=open_only)
    readings = hooks.pass_rate_readings(session=session, spec=spec)
    return RegressionAlertsPublic(
        count=len(rows),
        alerts=[alert_public(a, r) for a, r in rows],
        pass_rate_readings=[reading_public(r) for r in readings],
    )


@router.post(
    "/regression/alerts/{alert_id}/acknowledge",
    summary="Acknowledge a regression alert",
    description="A lead or the PM says a regression alert has been seen and acted on.",
)
def post_acknowledge(
    alert_id: int, session: SessionDep, principal: Principal = Depends(require_role(*ACK_ROLES))
) -> RegressionAlertPublic:
    """Acknowledge a regression alert."""
    try:
        alert = alerts.acknowledge_alert(session=session, alert_id=alert_id, user_id=principal.user_id)
    except LookupError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    run = session.get(Run, alert.run_id)
    assert run is not None  # the foreign key guarantees it
    return alert_public(alert, run)
