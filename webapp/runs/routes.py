"""JSON API: runs and their drafts."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Response
from pydantic import JsonValue

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, stored_id
from webapp.runs import hooks, pipeline, service
from webapp.runs.deps import RunDep
from webapp.runs.schemas import DraftBatchPublic, DraftPublic, RunCreate, RunDraftsPublic, RunPublic
from webapp.web.api_docs import error_response
from webapp.web.deps import ANY_ROLE, SpecDep, readable_by_ci, require_pipeline
from webapp.web.request_limits import EVENTS_BODY_LIMIT

router = APIRouter(tags=["runs"])


@router.get(
    "/runs",
    summary="List the runs",
    description=(
        "Anyone on the team (and the team's CI, with a `ci` token) lists the runs of the drafting "
        "assistant, newest first, with their dataset, versions, state and draft counts."
    ),
    response_model=list[RunPublic],
)
def api_runs(session: SessionDep, principal: Principal = Depends(readable_by_ci(*ANY_ROLE))) -> list[RunPublic]:
    """List runs, newest first, with dataset and draft counts."""
    return [RunPublic.of_row(s) for s in service.list_runs(session=session)]


@router.get(
    "/runs/{run}/drafts",
    summary="Read a run's drafts",
    description=(
        "Anyone on the team (and the team's CI) reads a run (by name or id) and its drafts, filtered by "
        "the case's category and intent or the draft's intent. Blind grading: a labeler gets no "
        "confidence (nor the raw output carrying it) for a draft they have not graded."
    ),
    response_model=RunDraftsPublic,
)
def api_run_drafts(
    session: SessionDep,
    spec: SpecDep,
    category: str = "",
    intent: str = Query("", description="The case's intent"),
    draft_intent: str = Query("", description="The intent the assistant predicted for the draft"),
    *,
    principal: Principal = Depends(readable_by_ci(*ANY_ROLE)),
    run: RunDep,
) -> RunDraftsPublic:
    """Return a run (by name or id) and its drafts (filtered by the case's category and intent, the draft's intent).

    Blind grading: a labeler gets no confidence (nor the raw output carrying it) for a draft they have not graded.
    """
    rows = service.list_drafts(
        session=session, run_id=stored_id(run.id), category=category, intent=intent, draft_intent=draft_intent
    )
    signals = hooks.signals_view(session=session, spec=spec, principal=principal, run_id=stored_id(run.id))
    return RunDraftsPublic(
        run=RunPublic.of_row(service.run_row(session=session, run=run)),
        drafts=[DraftPublic.of_case(row.draft, row.case, signals_hidden=signals.hides(stored_id(row.draft.id))) for row in rows],
    )


# --- the pipeline's API (issue 40): the team's CI pushes a run and its drafts ------------------------


@router.post(
    "/runs",
    status_code=201,
    summary="Create a run (the pipeline)",
    description=(
        "The team's CI calls this first, once per pipeline run (a model, prompt or retrieval change), to "
        "open the run its drafts go to. Idempotent: the same name with the same fields answers the stored "
        "run (200); other fields are 409. Needs a `ci` token, or an ML lead or admin."
    ),
    responses={
        200: {"model": RunPublic, "description": "A run of that name exists with the same fields: it is answered, nothing changes"},
        409: error_response("A run of that name exists with other fields (the detail names them)"),
        422: error_response("A field is missing or too long, or the dataset does not exist"),
    },
)
def api_create_run(
    body: RunCreate, session: SessionDep, response: Response, principal: Principal = Depends(require_pipeline())
) -> RunPublic:
    """Create a run for the team's pipeline, or answer the same run again."""
    fields = pipeline.RunFields(
        dataset=body.dataset,
        model_version=body.model_version or "",
        prompt_version=body.prompt_version or "",
        retrieval_version=body.retrieval_version or "",
        commit=body.commit or "",
        notes=body.notes or "",
    )
    try:
        made = pipeline.create_run(session=session, name=body.name, fields=fields)
    except pipeline.RunConflict as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    response.status_code = 201 if made.created else 200
    return RunPublic.of_row(service.run_row(session=session, run=made.run))


DRAFT_RECORDS = Body(
    description="Draft records, each in the shape of a line of `draftdesk import drafts` (case_id, draft_text, "
    f"citations, confidence, intent, escalated, sample_index, latency_ms, cost_usd, raw_output); at most {pipeline.MAX_BATCH}",
    examples=[[{"case_id": "T-001", "draft_text": "You can reset it under Settings.", "citations": [{"article_id": "KB-3001", "revision": 4}], "confidence": 0.82, "intent": "password_reset"}]],
)


@router.post(
    "/runs/{run}/drafts",
    status_code=201,
    max_body_size=EVENTS_BODY_LIMIT,
    summary="Add a batch of drafts to a run (the pipeline)",
    description=(
        "The team's CI sends the drafts of its run in batches of up to 1,000, after creating the run. The "
        "batch is checked by the rules of `draftdesk import drafts` and stored whole or not at all; a "
        "retried batch counts as unchanged. Drafts stored with other content are 409 unless "
        "`replace=true` while the run is open. Needs a `ci` token, or an ML lead or admin."
    ),
    responses={
        200: {"model": DraftBatchPublic, "description": "Nothing new: every draft was unchanged or replaced"},
        404: error_response("No run with that name or id"),
        409: error_response("Drafts stored with other content (without replace=true), a completed run, or graded drafts whose text would change"),
        413: error_response(f"More than {pipeline.MAX_BATCH} drafts in one request"),
        422: error_response("Bad records: `detail` lists up to 20 as {loc: [body, index, field], msg, type}; `errors_total` counts them all"),
    },
)
def api_add_drafts(
    session: SessionDep,
    response: Response,
    records: Annotated[list[JsonValue], DRAFT_RECORDS],
    replace: bool = Query(False, description="Replace drafts stored with other content (only while the run is open)"),
    *,
    principal: Principal = Depends(require_pipeline()),
    run: RunDep,
) -> DraftBatchPublic:
    """Store a batch of the pipeline's drafts in a run, all or nothing."""
    try:
        done = pipeline.add_drafts(
            session=session, run=run, records=list(records), replace=replace, grade_counts=hooks.grade_counts
        )
    except pipeline.BatchTooLarge as exc:
        raise HTTPException(status_code=413, detail=str(exc)) from None
    except pipeline.DraftConflict as exc:
        raise HTTPException(status_code=409, detail=str(exc)) from None
    response.status_code = 201 if done.created else 200
    return DraftBatchPublic(created=done.created, unchanged=done.unchanged, replaced=done.replaced)
