"""JSON API shapes of the knowledge base."""

from __future__ import annotations

from pydantic import BaseModel
from sqlmodel import Session, col, select

from webapp.kb.models import KbRevision
from webapp.kb.service import list_articles
from webapp.web.api_schemas import Day


class RevisionPublic(BaseModel):
    """One revision of an article."""

    revision: int
    title: str
    status: str
    effective_date: Day


class ArticlePublic(BaseModel):
    """An article with its state, current revision and every revision (newest first)."""

    article_id: str
    intent: str | None
    title: str
    status: str
    current_revision: int | None
    revisions: list[RevisionPublic]


def articles_public(*, session: Session, q: str = "") -> list[ArticlePublic]:
    """Return articles as the JSON API shows them: state, current revision, and every revision."""
    summaries = list_articles(session=session, q=q)
    ids = [a.article_id for a in summaries]
    revisions: dict[str, list[KbRevision]] = {}
    if ids:
        stmt = select(KbRevision).where(col(KbRevision.article_id).in_(ids)).order_by(col(KbRevision.revision).desc())
        for rev in session.exec(stmt).all():
            revisions.setdefault(rev.article_id, []).append(rev)
    return [
        ArticlePublic(
            article_id=a.article_id,
            intent=a.intent,
            title=a.title,
            status=a.status,
            current_revision=a.current_revision,
            revisions=[
                RevisionPublic(revision=r.revision, title=r.title, status=r.status, effective_date=r.effective_date.isoformat())
                for r in revisions.get(a.article_id, [])
            ],
        )
        for a in summaries
    ]
