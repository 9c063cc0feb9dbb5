"""The KB pages' views: one typed view per page, built by the service's named queries.

A page renders its view's fields as the template's variables (`webapp.web.templating.render_view`), so a template can
use only what its view declares.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlmodel import Session

from webapp.kb import service
from webapp.kb.models import REVISION_STATUSES, KbArticle


@dataclass(frozen=True)
class KbListView:
    """/kb: the articles matching the search and status, with the KB's size."""

    articles: list[service.ArticleSummary]
    q: str
    status: str
    statuses: tuple[str, ...]
    total: int


@dataclass(frozen=True)
class RevisionRow:
    """One revision as the article page shows it: its text and what it is now (not only what it was stored as)."""

    revision: int
    title: str
    body: str
    effective_date: dt.date
    status: str


@dataclass(frozen=True)
class KbArticleView:
    """/kb/{article_id}: an article, every revision (newest first) and its state."""

    article: KbArticle
    revisions: list[RevisionRow]
    state: str


def kb_list_view(*, session: Session, q: str, status: str) -> KbListView:
    """Return the list page's view; an unknown status filters nothing."""
    status = status if status in REVISION_STATUSES else ""
    return KbListView(
        articles=service.list_articles(session=session, q=q, status=status),
        q=q,
        status=status,
        statuses=REVISION_STATUSES,
        total=service.count_articles(session=session),
    )


def kb_article_view(*, session: Session, article_id: str) -> KbArticleView:
    """Return an article's page view (state "deleted" when it has no revision left); raise KbNotFound."""
    article = service.get_article(session=session, article_id=article_id)
    revisions = service.get_revisions(session=session, article_id=article_id)
    states = service.states_of(revisions)
    rows = [RevisionRow(r.revision, r.title, r.body, r.effective_date, states[(r.article_id, r.revision)]) for r in revisions]
    return KbArticleView(article, rows, service.article_state(revisions) if revisions else "deleted")
