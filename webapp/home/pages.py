"""The home page: what is waiting for each role."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.web.cards import HomeCard, home_cards
from webapp.web.deps import ANY_ROLE, SpecDep, require_role
from webapp.web.templating import render_view

router = APIRouter()


@dataclass(frozen=True)
class HomeView:
    """/: the cards of what is waiting for the signed-in user (webapp.web.cards)."""

    cards: list[HomeCard]


@router.get("/", response_class=HTMLResponse, name="home")
def home(
    request: Request, session: SessionDep, spec: SpecDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> HTMLResponse:
    """Show the signed-in user what is waiting for them."""
    return render_view(request, "home/index.html", HomeView(cards=home_cards(session=session, principal=principal, spec=spec)))
