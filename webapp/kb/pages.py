"""KB browser: the article list with search, and an article with all its revisions."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.kb import service, views
from webapp.web.deps import ANY_ROLE, require_role
from webapp.web.templating import render_view

router = APIRouter()


@router.get("/kb", response_class=HTMLResponse, name="kb_list")
def kb_list(
    request: Request,
    session: SessionDep,
    q: str = "",
    status: str = "",
    principal: Principal = Depends(require_role(*ANY_ROLE)),
) -> HTMLResponse:
    """List KB articles, searchable by id, title or intent, filterable by status."""
    return render_view(request, "kb/list.html", views.kb_list_view(session=session, q=q, status=status), block="results")


@router.get("/kb/{article_id}", response_class=HTMLResponse, name="kb_article")
def kb_article(
    request: Request, article_id: str, session: SessionDep, principal: Principal = Depends(require_role(*ANY_ROLE))
) -> HTMLResponse:
    """Show an article with every revision, the current one marked."""
    try:
        view = views.kb_article_view(session=session, article_id=article_id)
    except service.KbNotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from None
    return render_view(request, "kb/article.html", view)
