"""JSON API: KB articles with their revisions."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from webapp.auth.service import Principal
from webapp.core.db import SessionDep
from webapp.kb.schemas import ArticlePublic, articles_public
from webapp.web.deps import ANY_ROLE, require_role

router = APIRouter(tags=["kb"])


@router.get(
    "/kb/articles",
    summary="List the KB articles",
    description=(
        "Anyone on the team lists the help-center articles the checks cite against: each article's state "
        "and every revision's number, title, status and effective date."
    ),
    response_model=list[ArticlePublic],
)
def api_kb_articles(
    session: SessionDep, q: str = "", principal: Principal = Depends(require_role(*ANY_ROLE))
) -> list[ArticlePublic]:
    """List KB articles with their state and every revision's number, title, status and effective date."""
    return articles_public(session=session, q=q)
