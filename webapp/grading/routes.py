"""JSON API of grading: grades, blind reads, adjudications, agreement, final grades and exports."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel

from webapp.auth.service import Principal
from webapp.core.csv_export import attachment_headers, csv_response
from webapp.core.db import SessionDep, stored_id
from webapp.grading.adjudication import decide_adjudication, list_adjudications, return_grade
from webapp.grading.agreement import agreement_report
from webapp.grading.errors import GradeInvalid, GradingError
from webapp.grading.export import export_csv, export_jsonl, export_rows
from webapp.grading.grades import grade_history, grades_visible_to, record_grade, revise_grade
from webapp.grading.outcome import finalised
from webapp.grading.queue import BatchFilter, next_item
from webapp.grading.schemas import (
    AdjudicationFilter,
    AdjudicationPublic,
    AdjudicationsPublic,
    AgreementPublic,
    DecisionPublic,
    DraftGradesPublic,
    FinalGradePublic,
    FinalGradesPublic,
    GradeChangePublic,
    GradePublic,
    ReservedPublic,
    ResolvedPublic,
    ReturnedPublic,
)
from webapp.grading.scores import GRADER_ROLES, validate_scores
from webapp.grading.status import grading_status
from webapp.runs.deps import RunDep
from webapp.web.api_docs import error_response
from webapp.web.deps import SpecDep, require_role

router = APIRouter(tags=["grading"])

GRADERS = require_role(*GRADER_ROLES)
LEAD = require_role("lead")


def http_error(exc: GradingError) -> HTTPException:
    """Map a grading error to an HTTP error; 422s name the field like request validation does."""
    if exc.status == 422:
        return HTTPException(status_code=422, detail=[{"field": exc.field or "", "message": exc.message}])
    return HTTPException(status_code=exc.status, detail=exc.message)


class ScoresIn(BaseModel):
    # Scores are checked by the service against the spec's rubric (ranges come from the spec file),
    # so they arrive untyped here and a bad one gets a 422 naming its field.
    factual_accuracy: object = None
    citation_relevance: object = None
    tone: object = None
    completeness: object = None
    rationale: str = ""
    unsupported_claim: str | None = None


class GradeIn(ScoresIn):
    draft_id: int


class AdjudicationIn(ScoresIn):
    action: Literal["resolve", "return"] = "resolve"
    note: str = ""
    grade_id: int | None = None
    comment: str = ""


@router.post(
    "/grades",
    summary="Grade a draft",
    description=(
        "A labeler or lead records their grade of a draft against the four-criterion rubric. Grading the "
        "same draft twice, with no grader place left, or once it is adjudicated is 409 (PUT revises a "
        "grade)."
    ),
    status_code=201,
    response_model=GradePublic,
    responses={
        404: error_response("No draft with that id"),
        409: error_response(
            "Already graded by the caller, no grader place left, adjudicated, or in no grading queue "
            "(an escalation, a fallback, or a draft its run's sample did not draw)"
        ),
    },
)
def create_grade(
    body: GradeIn, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> GradePublic:
    """Record the caller's grade of a draft (409 if they already graded it; PUT revises)."""
    try:
        scores = validate_scores(spec=spec, data=body.model_dump())
        grade = record_grade(
            session=session, spec=spec, draft_id=body.draft_id, grader_id=principal.user_id, scores=scores
        )
    except GradingError as exc:
        raise http_error(exc) from exc
    finalised(session, grade.draft_id)
    return GradePublic.of(grade)


@router.put(
    "/grades/{grade_id}",
    summary="Revise your grade",
    description=(
        "A labeler or lead revises their own grade (the earlier one is kept in the history) until the "
        "draft is adjudicated (then 409)."
    ),
    response_model=GradePublic,
    responses={409: error_response("The draft is adjudicated (grades are locked), or in no grading queue any more")},
)
def update_grade(
    grade_id: int, body: ScoresIn, session: SessionDep, spec: SpecDep, principal: Principal = Depends(GRADERS)
) -> GradePublic:
    """Revise the caller's own grade (kept in the history) until the draft is adjudicated."""
    try:
        scores = validate_scores(spec=spec, data=body.model_dump())
        grade = revise_grade(
            session=session, spec=spec, grade_id=grade_id, grader_id=principal.user_id, scores=scores
        )
    except GradingError as exc:
        raise http_error(exc) from exc
    finalised(session, grade.draft_id)
    return GradePublic.of(grade)


@router.get(
    "/drafts/{draft_id}/grades",
    summary="Read a draft's grades",
    description=(
        "A grader reads every grade of a draft once they have graded it themselves (403 before, so "
        "grading stays blind); a lead reads them any time."
    ),
    response_model=DraftGradesPublic,
)
def draft_grades(
    draft_id: int, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> DraftGradesPublic:
    """Return every grade of a draft (403 while the caller has not graded it, unless lead)."""
    try:
        grades = grades_visible_to(session=session, draft_id=draft_id, principal=principal)
    except GradingError as exc:
        raise http_error(exc) from exc
    history = grade_history(session=session, draft_id=draft_id, principal=principal)
    return DraftGradesPublic(
        draft_id=draft_id,
        grades=[GradePublic.of(g) for g in grades],
        history=[GradeChangePublic.of(h) for h in history],
    )


@router.post(
    "/grading/runs/{run}/next",
    summary="Take your next draft to grade",
    description=(
        "A labeler's or lead's grading tool reserves the caller's next draft of a run (204 when none is "
        "left); `intent` filters by the case's intent, `draft_intent` by the draft's."
    ),
    response_model=ReservedPublic,
    responses={204: {"description": "No draft of the run is left for the caller"}},
)
def take_next(
    session: SessionDep,
    spec: SpecDep,
    category: str | None = None,
    intent: str | None = None,
    draft_intent: str | None = None,
    golden: bool | None = None,
    *,
    principal: Principal = Depends(GRADERS),
    run: RunDep,
) -> ReservedPublic | Response:
    """Reserve the caller's next draft of a run, by name or id (204 when none is left); `intent` is the case's, `draft_intent` the draft's."""
    batch = BatchFilter(
        run_id=stored_id(run.id), category=category, intent=intent, draft_intent=draft_intent, golden=golden
    )
    draft = next_item(session=session, spec=spec, grader_id=principal.user_id, batch=batch)
    if draft is None:
        return Response(status_code=204)  # no body: a 204 carries none
    return ReservedPublic(draft_id=stored_id(draft.id), reserved_minutes=spec.grading.reservation_minutes)


@router.get(
    "/adjudications",
    summary="List the adjudications",
    description="The team lead lists the disagreements between two graders by status, both grades side by side.",
    response_model=AdjudicationsPublic,
)
def adjudications(
    session: SessionDep,
    status: AdjudicationFilter = Query("open"),
    principal: Principal = Depends(LEAD),
) -> AdjudicationsPublic:
    """List adjudications by status, with both grades side by side."""
    items = list_adjudications(session=session, status=None if status == "all" else status)
    out = [
        AdjudicationPublic.of(adj, grades=grades_visible_to(session=session, draft_id=adj.draft_id, principal=principal))
        for adj in items
    ]
    return AdjudicationsPublic(status=status, items=out)


@router.post(
    "/adjudications/{adjudication_id}",
    summary="Decide an adjudication",
    description=(
        "The team lead resolves a disagreement with a final grade and a note, or returns one grade for "
        "rework; a decided adjudication is 409."
    ),
    response_model=DecisionPublic,
    responses={409: error_response("The adjudication is already decided, or the grade is not one of it")},
)
def decide(
    adjudication_id: int,
    body: AdjudicationIn,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(LEAD),
) -> ResolvedPublic | ReturnedPublic:
    """Resolve an adjudication with a final grade and note, or return one grade for rework."""
    try:
        if body.action == "return":
            if body.grade_id is None:
                raise GradeInvalid("grade_id: name the grade to return", field="grade_id")
            grade = return_grade(
                session=session,
                adjudication_id=adjudication_id,
                grade_id=body.grade_id,
                lead_id=principal.user_id,
                comment=body.comment,
            )
            return ReturnedPublic(action="return", grade=GradePublic.of(grade))
        final = decide_adjudication(
            session=session,
            spec=spec,
            adjudication_id=adjudication_id,
            lead_id=principal.user_id,
            data=body.model_dump(),
            note=body.note,
        )
    except GradingError as exc:
        raise http_error(exc) from exc
    finalised(session, final.draft_id)
    return ResolvedPublic(action="resolve", final=FinalGradePublic.of(final))


@router.get(
    "/grading/agreement",
    summary="Read the graders' agreement",
    description=(
        "The lead and the PM read agreement per criterion, grader pair, grader and ISO week: the numbers "
        "of the agreement page."
    ),
    response_model=AgreementPublic,
)
def agreement(
    session: SessionDep,
    spec: SpecDep,
    run_id: int | None = None,
    principal: Principal = Depends(require_role("lead", "pm")),
) -> AgreementPublic:
    """Return agreement per criterion, grader pair, grader and ISO week (the agreement page's numbers)."""
    return agreement_report(session=session, spec=spec, run_id=run_id)


@router.get(
    "/grading/runs/{run}/final-grades",
    summary="Download a run's final grades",
    description=(
        "The lead and the PM download a run's final grades (run by name or id) with both graders' scores "
        "and the adjudication, as JSON, CSV or JSONL."
    ),
    response_model=FinalGradesPublic,
    responses={
        200: {
            "description": "The final grades as JSON, or as a CSV or JSONL download (format=csv, format=jsonl)",
            "content": {
                "text/csv": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        }
    },
)
def run_final_grades(
    session: SessionDep,
    format: Literal["json", "csv", "jsonl"] = "json",
    *,
    principal: Principal = Depends(require_role("lead", "pm")),
    run: RunDep,
) -> FinalGradesPublic | Response:
    """Return a run's final grades (run by name or id) with both graders' scores and the adjudication (JSON, CSV or JSONL)."""
    run_id = stored_id(run.id)
    if format == "csv":
        return csv_response(export_csv(session=session, run_id=run_id), f"final-grades-{run.id}.csv")
    if format == "jsonl":
        return PlainTextResponse(
            export_jsonl(session=session, run_id=run_id),
            media_type="application/x-ndjson",
            headers=attachment_headers(f"final-grades-{run.id}.jsonl"),
        )
    status = grading_status(session=session, run_id=run_id)
    return FinalGradesPublic(run_id=run_id, counts=status.counts, items=export_rows(session=session, run_id=run_id))
