"""Adjudication and agreement pages: the lead's queue of disagreements, final grades, returns for rework."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

from fastapi import Depends, Form, Request
from fastapi.responses import HTMLResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.db import SessionDep, id_from_ref
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading import hooks
from webapp.grading.adjudication import (
    ADJUDICATION_STATES,
    adjudication_queue_view,
    decide_adjudication,
    return_grade,
)
from webapp.grading.agreement import agreement_report
from webapp.grading.errors import GradingError
from webapp.grading.forms import LEAD, ResolveForm, ReturnForm, router
from webapp.grading.item_reads import user_names
from webapp.grading.models import Adjudication, Grade
from webapp.grading.outcome import finalised
from webapp.grading.overview import runs_newest_first
from webapp.grading.schemas import AgreementPublic
from webapp.grading.scores import ScoreValues
from webapp.runs.models import Draft, Run
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
        judge=hooks.judge_lookup(),
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
        return _refused(request, session, spec, principal, adjudication_id, form, exc.message)
    finalised(session, final.draft_id)
    return redirect_with_flash(request, QUEUE, text=f"Draft {final.draft_id}: final grade set.")


def _refused(
    request: Request, session: Session, spec: EvalSpec, principal: Principal, adjudication_id: int,
    form: ResolveForm, message: str,
) -> Response:
    """Show the queue again (422) with the lead's scores and note still in the refused item's form.

    A redirect emptied the form (issue 41): the lead lost the scores and the note to a refusal
    about one field. An adjudication that does not exist (or is no longer open) still redirects
    with the message, as there is no form to keep.
    """
    adj = session.get(Adjudication, adjudication_id)
    if adj is None or adj.status not in ("open", "rework"):
        return redirect_with_flash(request, QUEUE, text=f"Adjudication {adjudication_id}: {message}", kind="error")
    view = adjudication_queue_view(session=session, spec=spec, principal=principal, status=adj.status, judge=hooks.judge_lookup())
    kept: ScoreValues = dict(form.scores_data())
    items = [replace(i, prefill=kept, note=form.note) if i.adj.id == adjudication_id else i for i in view.items]
    view = replace(view, items=items, error=f"Adjudication {adjudication_id}: {message}")
    return render_view(request, "grading/adjudication.html", view, block="queue", status_code=422)


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
    return redirect_with_flash(request, QUEUE, text=returned_text(session=session, grade=grade))


def returned_text(*, session: Session, grade: Grade) -> str:
    """Say whose grade of which draft went back ("Alice's grade of draft 12 (case c-3) returned to Alice")."""
    who = user_names(session=session, user_ids={grade.grader_id}).get(grade.grader_id, "its grader")
    draft = session.get(Draft, grade.draft_id)
    case = session.get(EvalCase, draft.case_pk) if draft is not None else None
    where = f"draft {grade.draft_id}" + (f" (case {case.case_id})" if case is not None else "")
    return f"{who}’s grade of {where} returned to {who} for another look."


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
