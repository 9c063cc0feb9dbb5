"""JSON API: KB articles with their revisions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from webapp.auth.service import Principal
from webapp.db import SessionDep
from webapp.deps import ANY_ROLE, require_role
from webapp.kb import service

router = APIRouter(tags=["kb"])


@router.get("/kb/articles")
def api_kb_articles(
    session: SessionDep, q: str = "", principal: Principal = Depends(require_role(*ANY_ROLE))
) -> list[dict[str, Any]]:
    """List KB articles with their state and every revision's number, status and effective date."""
    out = []
    for a in service.list_articles(session=session, q=q):
        revisions = service.get_revisions(session=session, article_id=a.article_id)
        out.append(
            {
                "article_id": a.article_id,
                "intent": a.intent,
                "title": a.title,
                "status": a.status,
                "current_revision": a.current_revision,
                "revisions": [
                    {
                        "revision": r.revision,
                        "title": r.title,
                        "status": r.status,
                        "effective_date": r.effective_date.isoformat(),
                    }
                    for r in revisions
                ],
            }
        )
    return out
