"""The survey page: counts and net score, answers, and recording answers on an agent's behalf.

Agents are not users of the web app; their drafting tool answers through the API. The page lets
a support lead record answers gathered another way (a meeting, a paper form) and open rounds.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.core.spec import EvalSpec
from webapp.survey import service
from webapp.survey.views import survey_view
from webapp.web.deps import SpecDep, require_role
from webapp.web.templating import render_view

router = APIRouter()
READERS = ("support_lead", "pm", "lead", "ml_lead", "admin")
WRITERS = ("support_lead", "admin")


def _page(
    request: Request,
    session: Session,
    principal: Principal,
    spec: EvalSpec,
    error: str | None = None,
    status: int = 200,
    round_id: int | None = None,
) -> HTMLResponse:
    """Render the survey page (a round's counts and answers) with an optional error naming the field."""
    try:
        view = survey_view(session=session, spec=spec, round_id=round_id, can_write=principal.has_role(*WRITERS), error=error)
    except LookupError as exc:
        raise HTTPException(404, detail=str(exc)) from None
    return render_view(request, "survey/index.html", view, status_code=status)


@router.get("/survey", response_class=HTMLResponse)
def survey_page(
    request: Request,
    session: SessionDep,
    spec: SpecDep,
    round: int | None = None,
    principal: Principal = Depends(require_role(*READERS)),
) -> HTMLResponse:
    """Show a round's counts, net score and answers (default: the newest), and every round's results."""
    return _page(request, session, principal, spec, round_id=round)


@router.post("/survey/answers")
def survey_answer(
    request: Request,
    session: SessionDep,
    agent_id: Annotated[str, Form()],
    helpful: Annotated[str, Form()],
    spec: SpecDep,
    comment: Annotated[str, Form()] = "",
    principal: Principal = Depends(require_role(*WRITERS)),
) -> Response:
    """Record an answer on an agent's behalf."""
    try:
        service.record_answer(session=session, agent_id=agent_id, helpful=helpful, comment=comment)
    except service.SurveyError as exc:
        return _page(request, session, principal, spec, error=str(exc), status=422)
    return RedirectResponse("/survey", status_code=303)


@router.post("/survey/rounds")
def survey_open_round(
    request: Request,
    session: SessionDep,
    name: Annotated[str, Form()],
    spec: SpecDep,
    principal: Principal = Depends(require_role(*WRITERS)),
) -> Response:
    """Open a new survey round (closing the open one)."""
    try:
        service.open_round(session=session, name=name)
    except service.SurveyError as exc:
        return _page(request, session, principal, spec, error=str(exc), status=422)
    return RedirectResponse("/survey", status_code=303)
