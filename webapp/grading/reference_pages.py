"""Reference response pages: the list of cases with their reference's state, and the editor with versions and grades."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, id_from_ref
from webapp.grading import references as reference_service
from webapp.grading.errors import GradingError
from webapp.grading.forms import (
    FACTUAL_KEYS,
    GRADERS,
    LEAD,
    SHORTCUTS,
    ReferenceForm,
    ScoresForm,
    router,
)
from webapp.grading.scores import validate_scores
from webapp.web.deps import SpecDep
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import render_view


@router.get("/references", response_class=HTMLResponse)
def references(
    request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """List test cases with their reference responses: missing, waiting for approval, approved."""
    view = reference_service.references_view(session=session, show=request.query_params.get("show", "all"))
    return render_view(request, "grading/references.html", view)


@router.get("/references/{case_pk}", response_class=HTMLResponse)
def reference_page(
    case_pk: int, request: Request, session: SessionDep, principal: Principal = Depends(GRADERS)
) -> HTMLResponse:
    """Show a case's reference editor beside its ticket, conversation and KB, with every version and grades."""
    raw = request.query_params.get("draft", "")
    view = reference_service.reference_view(session=session, case_pk=case_pk, draft_id=id_from_ref(raw))
    if view is None:
        raise HTTPException(status_code=404, detail=f"test case {case_pk} does not exist")
    flash = flash_context(request)
    view = replace(
        view, is_lead=principal.has_role("lead"), me=principal.user_id, flash=flash["flash"], error=flash["error"]
    )
    constants = {"shortcuts": SHORTCUTS, "factual_keys": FACTUAL_KEYS}
    return consume_flash(request, render_view(request, "grading/reference.html", view, constants=constants))


def _reference_url(case_pk: int, draft: str = "") -> str:
    if id_from_ref(draft) is not None:
        return f"/grading/references/{case_pk}?" + urlencode({"draft": draft})
    return f"/grading/references/{case_pk}"


@router.post("/references/{case_pk}")
def save_reference(
    case_pk: int,
    form: Annotated[ReferenceForm, Form()],
    request: Request,
    session: SessionDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Save a new version of the case's reference response."""
    try:
        v = reference_service.save_reference(
            session=session, case_pk=case_pk, author_id=principal.user_id, text=form.text, note=form.note
        )
    except GradingError as exc:
        if exc.status == 404:
            raise HTTPException(status_code=404, detail=exc.message) from exc
        return redirect_with_flash(request, _reference_url(case_pk, form.draft), text=exc.message, kind="error")
    return redirect_with_flash(request, _reference_url(case_pk, form.draft), text=f"Version {v.version} saved.")


@router.post("/references/versions/{reference_id}/approve")
def approve_reference(
    reference_id: int, request: Request, session: SessionDep, principal: Principal = Depends(LEAD)
) -> Response:
    """Approve a reference version (lead; not their own, and only once)."""
    try:
        v = reference_service.approve_reference(
            session=session, reference_id=reference_id, lead_id=principal.user_id
        )
    except GradingError as exc:
        # 404, 403 (their own version), 409 (approved already): the page has no button for the last
        # two, so only a stale page or a crafted request gets here; the error page says why.
        raise HTTPException(status_code=exc.status, detail=exc.message) from exc
    return redirect_with_flash(request, _reference_url(v.case_pk), text=f"Version {v.version} approved.")


@router.post("/references/versions/{reference_id}/grade")
def grade_reference(
    reference_id: int,
    form: Annotated[ScoresForm, Form()],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(GRADERS),
) -> Response:
    """Grade a reference version against the rubric."""
    case_pk = reference_service.reference_case_of(session=session, reference_id=reference_id)
    if case_pk is None:
        raise HTTPException(status_code=404, detail=f"reference {reference_id} does not exist")
    data = form.scores_data()
    try:
        scores = validate_scores(spec=spec, data=data)
        reference_service.grade_reference(
            session=session, reference_id=reference_id, grader_id=principal.user_id, scores=scores
        )
    except GradingError as exc:
        return redirect_with_flash(request, _reference_url(case_pk), text=exc.message, kind="error")
    return redirect_with_flash(request, _reference_url(case_pk), text="Reference graded.")
