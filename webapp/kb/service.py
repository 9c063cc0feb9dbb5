"""Knowledge-base queries: current revisions, the snapshot for the checks, the list and search.

What a revision is now (current, deprecated, deleted) is read from all of its article's revisions
by webapp.kb.snapshot.revision_states (stored revisions never change); the writes are in sync.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from webapp.kb.models import KbArticle, KbRevision
from webapp.kb.snapshot import KbSnapshot, revision_states


class KbNotFound(LookupError):
    """No article with that id."""


# --- queries ----------------------------------------------------------------------------------------


def current_revision(*, session: Session, article_id: str) -> KbRevision | None:
    """Return the current revision of an article (its newest, when stated current), or None."""
    newest = session.exec(
        select(KbRevision).where(KbRevision.article_id == article_id).order_by(col(KbRevision.revision).desc())
    ).first()
    return newest if newest is not None and newest.status == "current" else None


def current_revisions(*, session: Session) -> list[KbRevision]:
    """Return the current revision of every article that has one."""
    rows = list(session.exec(select(KbRevision)).all())
    states = revision_states((r.article_id, r.revision, r.status) for r in rows)
    return [r for r in rows if states[(r.article_id, r.revision)] == "current"]


def states_of(revisions: Sequence[KbRevision]) -> dict[tuple[str, int], str]:
    """Return what each revision is now, from every revision of their articles (webapp.kb.snapshot.revision_states)."""
    return revision_states((r.article_id, r.revision, r.status) for r in revisions)


def get_revisions(*, session: Session, article_id: str) -> list[KbRevision]:
    """Return every revision of an article, newest first."""
    return list(
        session.exec(
            select(KbRevision).where(KbRevision.article_id == article_id).order_by(col(KbRevision.revision).desc())
        ).all()
    )


def get_revision(*, session: Session, article_id: str, revision: int) -> KbRevision | None:
    """Return one revision of an article, or None."""
    return session.exec(
        select(KbRevision).where(KbRevision.article_id == article_id, KbRevision.revision == revision)
    ).first()


def get_article(*, session: Session, article_id: str) -> KbArticle:
    """Return an article by its id (e.g. KB-3001); raise KbNotFound."""
    art = session.exec(select(KbArticle).where(KbArticle.article_id == article_id)).first()
    if art is None:
        raise KbNotFound(f"no KB article {article_id!r}")
    return art


def kb_snapshot(*, session: Session) -> KbSnapshot:
    """Return every revision of every article with what it is now, for the automated checks."""
    return KbSnapshot.of(session.exec(select(KbRevision.article_id, KbRevision.revision, KbRevision.status)).all())


@dataclass
class CitedRevision:
    """A citation and the KB revision it names, as the KB holds it now: the one shape every domain shows."""

    article_id: str
    revision: int | None
    found: KbRevision | None  # None: the KB has no such revision
    current: KbRevision | None = None  # the article's current revision, when it has one
    status: str | None = None  # what the found revision is now (current, deprecated, deleted)

    @property
    def stale(self) -> bool:
        """Tell whether the cited revision exists but is no longer the current one."""
        return self.found is not None and self.status != "current"


def cited_revisions(*, session: Session, citations: Sequence[Mapping[str, object]] | None) -> list[CitedRevision]:
    """Return each citation with the exact revision it names and its article's current revision (one query)."""
    ids = {str(c.get("article_id", "")) for c in citations or []}
    revisions = list(session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all()) if ids else []
    return cited_in(citations, revisions)


def cited_in(citations: Sequence[Mapping[str, object]] | None, revisions: Sequence[KbRevision]) -> list[CitedRevision]:
    """Return each citation with the revision it names among `revisions` (every revision of the cited articles).

    A citation without a revision number finds none (`found` None); its article's current revision is in `current`.
    """
    by_key = {(r.article_id, r.revision): r for r in revisions}
    states = states_of(revisions)
    current = {r.article_id: r for r in revisions if states[(r.article_id, r.revision)] == "current"}
    out: list[CitedRevision] = []
    for c in citations or []:
        article_id, rev = str(c.get("article_id", "")), c.get("revision")
        number = rev if isinstance(rev, int) and not isinstance(rev, bool) else None
        found = by_key.get((article_id, number)) if number is not None else None
        status = states[(found.article_id, found.revision)] if found is not None else None
        out.append(CitedRevision(article_id, number, found, current.get(article_id), status))
    return out


@dataclass
class ArticleSummary:
    """One line of the KB list: the article, its newest revision's title, its state."""

    article_id: str
    intent: str | None
    title: str
    status: str  # current | deprecated | deleted: the state of the article as a whole
    current_revision: int | None
    revisions: int
    effective_date: dt.date | None


def article_state(revisions: Sequence[KbRevision]) -> str:
    """Tell the state of an article from its revisions: its newest revision's status."""
    return max(revisions, key=lambda r: r.revision).status


def list_articles(*, session: Session, q: str = "", status: str = "") -> list[ArticleSummary]:
    """List articles with their state; `q` matches article id, any revision's title, or intent."""
    stmt = select(KbArticle).order_by(KbArticle.article_id)
    if q.strip():
        like = f"%{q.strip().lower()}%"
        title_match = select(KbRevision.article_id).where(func.lower(KbRevision.title).like(like))
        stmt = stmt.where(
            or_(
                func.lower(KbArticle.article_id).like(like),
                func.lower(func.coalesce(KbArticle.intent, "")).like(like),
                col(KbArticle.article_id).in_(title_match),
            )
        )
    articles = session.exec(stmt).all()
    by_article: dict[str, list[KbRevision]] = {}
    if articles:
        ids = [a.article_id for a in articles]
        for rev in session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all():
            by_article.setdefault(rev.article_id, []).append(rev)
    out: list[ArticleSummary] = []
    for art in articles:
        revs = by_article.get(art.article_id, [])
        if not revs:
            continue
        shown = max(revs, key=lambda r: r.revision)
        cur = shown if shown.status == "current" else None
        summary = ArticleSummary(
            article_id=art.article_id,
            intent=art.intent,
            title=shown.title,
            status=article_state(revs),
            current_revision=cur.revision if cur else None,
            revisions=len(revs),
            effective_date=shown.effective_date,
        )
        if status and summary.status != status:
            continue
        out.append(summary)
    return out


def count_articles(*, session: Session) -> int:
    """Return how many articles the KB holds."""
    return session.exec(select(func.count()).select_from(KbArticle)).one()
