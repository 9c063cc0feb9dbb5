"""Adjudication and agreement pages: the lead's queue of disagreements, final grades, returns for rework."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

from fastapi import Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from webapp.app.flows import JUDGE
from webapp.auth.service import Principal
from webapp.core.db import SessionDep, id_from_ref
from webapp.grading.adjudication import (
    ADJUDICATION_STATES,
    adjudication_queue_view,
    decide_adjudication,
    return_grade,
)
from webapp.grading.agreement import agreement_report
from webapp.grading.errors import GradingError
from webapp.grading.forms import LEAD, ResolveForm, ReturnForm, router
from webapp.grading.outcome import finalised
from webapp.grading.overview import runs_newest_first
from webapp.grading.schemas import AgreementPublic
from webapp.runs.models import Run
from webapp.web.deps import SpecDep, require_role
from webapp.web.flash import consume_flash, flash_context, redirect_with_flash
from webapp.web.templating import render_view

QUEUE = "/grading/adjudication"  # where the lead's decisions return, with their one-time message


@router.get("/adjudication", response_class=HTMLResponse)
def adjudication_queue(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(LEAD)
) -> HTMLResponse:
    """Show disagreements with everything the graders saw, both grades, and the final-grade form."""
    status = request.query_params.get("status", "open")
    if status not in ADJUDICATION_STATES:
        status = "open"
    view = adjudication_queue_view(
        session=session,
        spec=spec,
        principal=principal,
        status=status,
        take=request.query_params.get("take", ""),  # "<adjudication id>:<grade id>": prefill with that grade
        judge=JUDGE,
    )
    flash = flash_context(request)
    view = replace(view, flash=flash["flash"], error=flash["error"])
    return consume_flash(request, render_view(request, "grading/adjudication.html", view, block="queue"))


@router.post("/adjudication/{adjudication_id}/resolve")
def resolve(
    adjudication_id: int,
    form: Annotated[ResolveForm, Form()],
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(LEAD),
) -> Response:
    """Set the final grade of a disagreement with a note."""
    try:
        final = decide_adjudication(
            session=session,
            spec=spec,
            adjudication_id=adjudication_id,
            lead_id=principal.user_id,
            data=form.scores_data(),
            note=form.note,
        )
    except GradingError as exc:
        session.rollback()
        return redirect_with_flash(request, QUEUE, text=f"Adjudication {adjudication_id}: {exc.message}", kind="error")
    finalised(session, final.draft_id)
    return redirect_with_flash(request, QUEUE, text=f"Draft {final.draft_id}: final grade set.")


@router.post("/adjudication/{adjudication_id}/return")
def send_back(
    adjudication_id: int,
    form: Annotated[ReturnForm, Form()],
    request: Request,
    session: SessionDep,
    principal: Principal = Depends(LEAD),
) -> Response:
    """Return one grade of a disagreement to its grader with a comment."""
    try:
        grade_id = int(form.grade_id or "0")
        grade = return_grade(
            session=session,
            adjudication_id=adjudication_id,
            grade_id=grade_id,
            lead_id=principal.user_id,
            comment=form.comment,
        )
    except (GradingError, ValueError) as exc:
        session.rollback()
        message = exc.message if isinstance(exc, GradingError) else "grade_id: not a number"
        return redirect_with_flash(request, QUEUE, text=f"Adjudication {adjudication_id}: {message}", kind="error")
    return redirect_with_flash(request, QUEUE, text=f"Grade {grade.id} returned to its grader.")


@dataclass(frozen=True)
class AgreementView:
    """The agreement page: the report, the runs to filter by (newest first) and the chosen run."""

    report: AgreementPublic
    runs: list[Run]
    run_id: int | None


@router.get("/agreement", response_class=HTMLResponse)
def agreement_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    principal: Principal = Depends(require_role("lead", "pm")),
) -> HTMLResponse:
    """Show inter-grader agreement per criterion, grader pair, grader and week."""
    raw = request.query_params.get("run_id") or ""
    run_id = id_from_ref(raw)
    report = agreement_report(session=session, spec=spec, run_id=run_id)
    runs = runs_newest_first(session=session)
    return render_view(request, "grading/agreement.html", AgreementView(report=report, runs=runs, run_id=run_id))
