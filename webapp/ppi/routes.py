"""JSON API: a run's sample for human grading, and its figures with 95% intervals."""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Depends, HTTPException, Request, Response

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.ppi import production, service, until_decided
from webapp.ppi.schemas import (
    FurtherSampleIn,
    ProductionWeekIn,
    ProductionWeekPublic,
    RunReportPublic,
    SampleIn,
    SamplePublic,
    UntilDecidedIn,
    UntilDecidedPublic,
    WeekQualityPublic,
)
from webapp.ppi.stored_figures import run_figures, stored_weekly_quality
from webapp.ppi.until_decided_view import until_decided_public
from webapp.ppi.views import report_public
from webapp.runs.deps import RunDep
from webapp.web.api_docs import error_response
from webapp.web.deps import SpecDep, readable_by_ci, require_role

router = APIRouter(tags=["ppi"])
# Labelers never see the judge's figures of a run they grade (blind grading).
VIEW_ROLES = ("lead", "pm", "support_lead", "ml_lead", "admin")  # ml_lead: reads the gate pages that link here, and judge health


@router.get(
    "/ppi/runs/{run}",
    summary="Read a run's intervals (judge + human sample)",
    description=(
        "The PM, the ML lead and leads read the run's rubric figures with 95% intervals (the judge on "
        "every draft, people on the sample) and what the judge's signals bought."
    ),
    response_model=RunReportPublic,
    responses={404: error_response("No such run, or the run has no sample"),
               503: error_response("The sample's figures are being computed (Retry-After: seconds)")},
)
def api_run_intervals(
    response: Response, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES)), *, run: RunDep
) -> RunReportPublic:
    """Return the run's rubric figures with 95% intervals (judge on every draft, people on the sample), and what the judge's signals bought.

    Read stored (webapp/ppi/stored_figures.py): `figures_state` "updating" when grades or draws
    changed since they were computed; 503 while a new sample's figures are computed for the first time.
    """
    read = run_figures(session=session, spec=spec, run_id=stored_id(run.id))
    if read.state == "computing":
        raise HTTPException(status_code=503, detail="run: the sample's figures are being computed; try again in a few seconds",
                            headers={"Retry-After": "2"})
    if read.value is None:
        raise HTTPException(status_code=404, detail="run: this run has no human-grading sample")
    ordered = until_decided.in_draw_order(session=session, run_id=stored_id(run.id))
    return report_public(read.value, spec, in_draw_order=ordered).model_copy(update={"figures_state": read.state})


@router.post(
    "/ppi/runs/{run}/sample",
    summary="Draw a run's human-grading sample",
    description=(
        "The lead draws the drafts people will grade, before any grade (inclusion probabilities, draws "
        "and seed stored, append-only)."
    ),
    status_code=201,
    response_model=SamplePublic,
    responses={422: error_response("Already sampled, already graded, or drafts without judge scores")},
)
def api_draw_sample(
    body: SampleIn, session: SessionDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> SamplePublic:
    """Draw the run's human-grading sample before any grade (pi, draws and seed stored, append-only)."""
    try:
        summary = service.draw_sample(
            session=session, run_id=stored_id(run.id), budget=body.budget, judge_version=body.judge_version, seed=body.seed
        )
    except service.PpiError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return SamplePublic.model_validate(dataclasses.asdict(summary))


@router.post(
    "/ppi/runs/{run}/further-sample",
    summary="Draw a further sample",
    description="The lead draws more drafts to settle an undecided gate (combined pi = 1 - (1 - pi1)(1 - pi2)).",
    status_code=201,
    response_model=SamplePublic,
    responses={422: error_response("The run has no sample yet")},
)
def api_draw_further_sample(
    body: FurtherSampleIn, session: SessionDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> SamplePublic:
    """Draw a further sample to settle an undecided gate (combined pi = 1 - (1 - pi1)(1 - pi2))."""
    try:
        summary = service.draw_further_sample(session=session, run_id=stored_id(run.id), budget=body.budget, seed=body.seed)
    except service.PpiError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    return SamplePublic.model_validate(dataclasses.asdict(summary))


def _week_view(made: production.WeekRun) -> ProductionWeekPublic:
    """Return the week's run as the API answers it."""
    row = made.week
    return ProductionWeekPublic(
        created=made.created, week=row.week, run_id=row.run_id, run_name=made.run.name,
        events_with_draft=row.events_with_draft, drafts_taken=row.drafts_taken, cap=row.cap,
        cap_seed=row.cap_seed, budget=row.budget,
    )


@router.post(
    "/ppi/production-weeks",
    summary="Make a production week's run",
    description=(
        "The lead turns one ISO week of production drafts into a run to grade (at most the configured "
        "cap, drawn uniformly); the same week again answers its run (200)."
    ),
    status_code=201,
    response_model=ProductionWeekPublic,
    responses={200: {"description": "The week has its run already: reported, not duplicated", "model": ProductionWeekPublic},
               422: error_response("Not an ISO week, or no production event with a draft that week")},
)
def api_production_week(
    body: ProductionWeekIn, request: Request, response: Response, session: SessionDep,
    principal: Principal = Depends(require_role("lead")),
) -> ProductionWeekPublic:
    """Turn one ISO week of production drafts into a run (at most the configured cap, drawn uniformly); idempotent."""
    try:
        made = production.create_week_run(
            session=session, week=body.week, budget=body.budget, cap=request.app.state.settings.ppi_weekly_draft_cap,
            seed=body.seed, created_by=principal.user_id,
        )
    except service.PpiError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    if not made.created:
        response.status_code = 200
    return _week_view(made)


@router.get(
    "/ppi/production-weeks",
    summary="Read the weekly production quality",
    description=(
        "The PM, the support lead and leads read each production week's human-graded overall quality with "
        "its 95% interval, oldest first."
    ),
    response_model=list[WeekQualityPublic],
)
def api_production_weeks(
    session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*VIEW_ROLES))
) -> list[WeekQualityPublic]:
    """Return each production week's human-graded overall quality with its 95% interval, oldest first."""
    return [production.week_view(w) for w in stored_weekly_quality(session=session, spec=spec)]


# Grade until decided (issue 43). Decision (docs/ppi.md, docs/security.md): the setting is the lead's alone, as the
# sample is (it spends the graders' time and closes a queue); the team's CI may read the calls with its `ci` token, as
# it reads the gate, to wait for the human-grading decision, but not set them.
UNTIL_DECIDED_404 = error_response("No such run, or the run has no human-grading sample")


@router.get(
    "/ppi/runs/{run}/until-decided",
    summary="Read a run's calls while graded until decided",
    description=(
        "Leads, the PM, the ML lead and the team's CI (a `ci` token) read whether the run is graded until decided (its cap, "
        "when and why its queue closed) and each gate criterion's call from the confidence sequence: decided or not, why, "
        "the stored decision with its time and the grades it rested on, decisions re-opened by later grades, and about how "
        "many further grades would decide."
    ),
    response_model=UntilDecidedPublic,
    responses={404: UNTIL_DECIDED_404},
)
def api_until_decided(
    session: SessionDep, spec: SpecDep, principal: Principal = Depends(readable_by_ci(*VIEW_ROLES)), *, run: RunDep
) -> UntilDecidedPublic:
    """Return the run's "grade until decided" setting and each gate criterion's call."""
    public = until_decided_public(session=session, spec=spec, run_id=stored_id(run.id), run_name=run.name)
    if public is None:
        raise HTTPException(status_code=404, detail="run: this run has no human-grading sample")
    return public


@router.put(
    "/ppi/runs/{run}/until-decided",
    summary="Set or unset grade until decided",
    description=(
        "The lead sets a sampled run to grade until decided (`on: true`, with an optional `cap` on its final grades): the "
        "queue serves its drawn drafts in draw order and closes by itself once every gate criterion is decided, or at the "
        "cap; `on: false` grades the whole sample again. The same body again changes nothing (idempotent) and answers the "
        "run's calls as the GET does."
    ),
    response_model=UntilDecidedPublic,
    responses={
        404: error_response("No such run"),
        422: error_response("A bad cap (below 1, above the run's drafts, below its final grades, or given with on: false), "
                            "a run without a sample, or one whose inclusion probabilities changed after a grade"),
    },
)
def api_set_until_decided(
    body: UntilDecidedIn, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role("lead")), *, run: RunDep
) -> UntilDecidedPublic:
    """Set (or unset) the run to grade until decided; an unchanged setting is left as it is."""
    run_id = stored_id(run.id)
    try:
        until_decided.apply_setting(session=session, spec=spec, run_id=run_id, on=body.on, cap=body.cap, user_id=principal.user_id)
    except until_decided.UntilDecidedError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from None
    public = until_decided_public(session=session, spec=spec, run_id=run_id, run_name=run.name)
    if public is None:  # apply_setting refuses a run without a sample
        raise HTTPException(status_code=422, detail="run: this run has no human-grading sample")
    return public
