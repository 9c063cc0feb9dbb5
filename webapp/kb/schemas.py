"""JSON API shapes of the knowledge base."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field, JsonValue
from sqlmodel import Session, col, select

from webapp.core.public import PublicModel
from webapp.kb.models import KbRevision, RevisionStatus
from webapp.kb.service import list_articles, states_of
from webapp.kb.sync import OUTCOMES, KbSyncResult, Outcome
from webapp.web.api_schemas import Day


class RevisionPublic(PublicModel):
    """One revision of an article, with what it is now (an older revision stated current reads deprecated)."""

    revision: int
    title: str
    status: RevisionStatus
    effective_date: Day


class ArticlePublic(PublicModel):
    """An article with its state, current revision and every revision (newest first)."""

    article_id: str
    intent: str | None
    title: str
    status: RevisionStatus
    current_revision: int | None
    revisions: list[RevisionPublic]


def articles_public(*, session: Session, q: str = "") -> list[ArticlePublic]:
    """Return articles as the JSON API shows them: state, current revision, and every revision."""
    summaries = list_articles(session=session, q=q)
    ids = [a.article_id for a in summaries]
    revisions: dict[str, list[KbRevision]] = {}
    states: dict[tuple[str, int], str] = {}
    if ids:
        stmt = select(KbRevision).where(col(KbRevision.article_id).in_(ids)).order_by(col(KbRevision.revision).desc())
        rows = list(session.exec(stmt).all())
        states = states_of(rows)
        for rev in rows:
            revisions.setdefault(rev.article_id, []).append(rev)
    return [
        ArticlePublic.of(
            a,
            revisions=[RevisionPublic.of(r, status=states[(r.article_id, r.revision)]) for r in revisions.get(a.article_id, [])],
        )
        for a in summaries
    ]


# --- the KB sync API (PUT/DELETE /kb/articles/{article_id}, POST /kb/sync) -----------------------------


class KbRevisionIn(BaseModel):
    """One revision as a request states it (documentation: the route checks it by the KB import's rules)."""

    article_id: str | None = Field(default=None, description="The article's id, e.g. KB-3001 (PUT: the path's; the sync: required)")
    revision: int | None = Field(default=None, ge=1, description="Its number; left out, the server numbers it (the newest plus one)")
    title: str | None = Field(default=None, max_length=300, description="Required unless the status is deprecated or deleted")
    body: str | None = Field(default=None, description="Required unless the status is deprecated or deleted")
    status: RevisionStatus = "current"
    effective_date: dt.date | None = Field(default=None, description="Left out: today (UTC)")
    intent: str | None = None


class KbFileIn(BaseModel):
    """One file of a help-center export, in the `draftdesk import kb` format (JSONL, YAML, or JSON)."""

    name: str = Field(max_length=300, description="The file's name; its extension gives its format (.jsonl, .yaml, .yml, .json)")
    content: str


class KbSyncIn(BaseModel):
    """A whole help-center export: records, files in the import's format, or both; one transaction."""

    articles: list[JsonValue] = Field(default_factory=list, description="Revisions as KbRevisionIn objects (article_id required)")
    files: list[KbFileIn] = Field(default_factory=list)
    delete_missing: bool = Field(
        default=False, description="Delete (a new revision with status deleted) every article Draft Desk holds that the export leaves out"
    )


class ArticleSyncPublic(PublicModel):
    """What a request did to one article: the outcome, its newest revision and its state now."""

    article_id: str
    outcome: Outcome
    revision: int
    state: RevisionStatus


class KbArticleSyncPublic(ArticleSyncPublic):
    """The answer of PUT and DELETE /kb/articles/{article_id}."""

    notes: list[str]


class KbSyncPublic(BaseModel):
    """The answer of POST /kb/sync: articles by outcome, revisions stored, each article's outcome, notes."""

    created: int
    revised: int
    unchanged: int
    deprecated: int
    deleted: int
    revisions: int = Field(description="Revisions stored by this request")
    articles: list[ArticleSyncPublic]
    notes: list[str] = Field(description="Each changed text of a stored revision, and the revision it was stored as")

    @classmethod
    def of(cls, result: KbSyncResult) -> KbSyncPublic:
        """Return the answer of a sync's result."""
        return cls(
            **{o: result.count(o) for o in OUTCOMES},
            revisions=result.revisions,
            articles=[ArticleSyncPublic.of(a) for a in result.articles],
            notes=result.notes,
        )
