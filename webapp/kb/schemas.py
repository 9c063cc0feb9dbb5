"""JSON API shapes of the knowledge base."""

from __future__ import annotations

from pydantic import BaseModel

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
