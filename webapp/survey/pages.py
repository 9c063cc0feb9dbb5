"""The survey page: counts and net score, answers, and recording answers on an agent's behalf.

Agents are not users of the web app; their drafting tool answers through the API. The page lets
a support lead record answers gathered another way (a meeting, a paper form) and open rounds.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.db import SessionDep, stored_id
from webapp.deps import require_role
from webapp.survey import service
from webapp.templating import render

router = APIRouter()
READERS = ("support_lead", "pm", "lead", "admin")
WRITERS = ("support_lead", "admin")


def _page(request: Request, session: Session, principal: Principal, error: str | None = None, status: int = 200) -> HTMLResponse:
    rnd = service.current_round(session=session)
    counts = service.counts(session=session)
    latest = service.rounds(session=session)
    shown = rnd or (latest[0] if latest else None)
    return render(
        request,
        "survey/index.html",
        {
            "round": rnd,
            "counts": counts,
            "answers": service.answers(session=session, round_id=stored_id(shown.id)) if shown else [],
            "rounds": latest,
            "can_write": principal.has_role(*WRITERS),
            "error": error,
        },
        status_code=status,
    )


@router.get("/survey", response_class=HTMLResponse)
def survey_page(request: Request, session: SessionDep, principal: Principal = Depends(require_role(*READERS))) -> HTMLResponse:
    """Show the survey counts, net score and answers."""
    return _page(request, session, principal)


@router.post("/survey/answers")
def survey_answer(
    request: Request,
    session: SessionDep,
    agent_id: Annotated[str, Form()],
    helpful: Annotated[str, Form()],
    comment: Annotated[str, Form()] = "",
    principal: Principal = Depends(require_role(*WRITERS)),
) -> Response:
    """Record an answer on an agent's behalf."""
    try:
        service.record_answer(session=session, agent_id=agent_id, helpful=helpful, comment=comment)
    except service.SurveyError as exc:
        return _page(request, session, principal, error=str(exc), status=422)
    return RedirectResponse("/survey", status_code=303)


@router.post("/survey/rounds")
def survey_open_round(
    request: Request,
    session: SessionDep,
    name: Annotated[str, Form()],
    principal: Principal = Depends(require_role(*WRITERS)),
) -> Response:
    """Open a new survey round (closing the open one)."""
    try:
        service.open_round(session=session, name=name)
    except service.SurveyError as exc:
        return _page(request, session, principal, error=str(exc), status=422)
    return RedirectResponse("/survey", status_code=303)
