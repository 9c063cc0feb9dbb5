"""The home page: what is waiting for each role."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.home.cards import home_cards
from webapp.web.deps import ANY_ROLE, SpecDep, require_role
from webapp.web.templating import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse, name="home")
def home(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> HTMLResponse:
    """Show the signed-in user what is waiting for them."""
    cards = home_cards(session=session, principal=principal, spec=spec)
    return render(request, "home/index.html", {"cards": cards})
