"""Knowledge-base queries (current revision, snapshot for the checks) and the KB import."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from webapp.datasets.records import Record, RecordError, file_format, read_records
from webapp.kb.models import REVISION_STATUSES, KbArticle, KbRevision
from webapp.kb.snapshot import KbSnapshot

ARTICLE_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*-[A-Za-z0-9][A-Za-z0-9._-]*$")
KB_FIELDS = ("article_id", "revision", "title", "body", "status", "effective_date", "intent")


class KbNotFound(LookupError):
    """No article with that id."""


# --- queries ----------------------------------------------------------------------------------------


def current_revision(*, session: Session, article_id: str) -> KbRevision | None:
    """Return the current revision of an article, or None (deleted, deprecated only, or unknown)."""
    return session.exec(
        select(KbRevision).where(KbRevision.article_id == article_id, KbRevision.status == "current")
    ).first()


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
    """Return every revision of every article with its status, for the automated checks."""
    snap = KbSnapshot()
    rows = session.exec(select(KbRevision.article_id, KbRevision.revision, KbRevision.status)).all()
    for article_id, revision, status in rows:
        snap.add(article_id, revision, status)
    return snap


@dataclass
class CitedRevision:
    """A citation and the KB revision it names, as the KB holds it now: the one shape every domain shows."""

    article_id: str
    revision: int | None
    found: KbRevision | None  # None: the KB has no such revision
    current: KbRevision | None = None  # the article's current revision, when it has one

    @property
    def stale(self) -> bool:
        """Tell whether the cited revision exists but is no longer the current one."""
        return self.found is not None and self.found.status != "current"


def cited_revisions(*, session: Session, citations: Sequence[Mapping[str, object]] | None) -> list[CitedRevision]:
    """Return each citation with the exact revision it names and its article's current revision (one query)."""
    ids = {str(c.get("article_id", "")) for c in citations or []}
    revisions = list(session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all()) if ids else []
    by_key = {(r.article_id, r.revision): r for r in revisions}
    current = {r.article_id: r for r in revisions if r.status == "current"}
    out: list[CitedRevision] = []
    for c in citations or []:
        article_id, rev = str(c.get("article_id", "")), c.get("revision")
        found = by_key.get((article_id, rev)) if isinstance(rev, int) else None
        out.append(CitedRevision(article_id, rev if isinstance(rev, int) else None, found, current.get(article_id)))
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


def article_state(revisions: list[KbRevision]) -> str:
    """Tell the state of an article from its revisions: current if one is, deleted if the newest is."""
    if any(r.status == "current" for r in revisions):
        return "current"
    newest = max(revisions, key=lambda r: r.revision)
    return "deleted" if newest.status == "deleted" else "deprecated"


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
        cur = next((r for r in revs if r.status == "current"), None)
        shown = cur or max(revs, key=lambda r: r.revision)
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


# --- import -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KbRecord:
    line: int
    article_id: str
    revision: int
    title: str
    body: str
    status: str
    effective_date: dt.date
    intent: str | None


@dataclass
class KbImportResult:
    """What a KB import did, revision by revision."""

    articles_created: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    demoted: list[str] = field(default_factory=list)  # "KB-3001 r2" superseded by a new current revision

    @property
    def summary(self) -> str:
        parts = [
            f"{self.created} revision(s) created",
            f"{self.updated} updated",
            f"{self.unchanged} unchanged",
            f"{self.articles_created} new article(s)",
        ]
        if self.demoted:
            parts.append("marked deprecated because a newer revision is current: " + ", ".join(self.demoted))
        return "; ".join(parts)


def _bad(record: Record, path: str, message: str) -> RecordError:
    return RecordError(f"record {record.index + 1}: {message}", path=path, line=record.line)


def _parse_kb_record(record: Record, path: str, intents: tuple[str, ...] | None) -> KbRecord:
    d = record.data
    if not isinstance(d, dict):
        raise _bad(record, path, f"must be an object with {', '.join(KB_FIELDS[:6])}")
    for name in ("article_id", "revision", "title", "body", "status", "effective_date"):
        if name not in d or d[name] is None:
            raise _bad(record, path, f"missing required field: {name}")
    unknown = sorted(set(d) - set(KB_FIELDS))
    if unknown:
        raise _bad(record, path, f"unknown field(s): {', '.join(unknown)} (allowed: {', '.join(KB_FIELDS)})")
    aid = d["article_id"]
    if not isinstance(aid, str) or not ARTICLE_ID_RE.match(aid) or len(aid) > 40:
        raise _bad(record, path, f"article_id: {aid!r} is not an article id such as 'KB-3001'")
    rev = d["revision"]
    if isinstance(rev, bool) or not isinstance(rev, int) or rev < 1:
        raise _bad(record, path, f"revision: must be a whole number of at least 1, not {rev!r}")
    title, body = d["title"], d["body"]
    if not isinstance(title, str) or not title.strip():
        raise _bad(record, path, "title: must be a non-empty string")
    if len(title) > 300:
        raise _bad(record, path, "title: must be at most 300 characters")
    if not isinstance(body, str) or not body.strip():
        raise _bad(record, path, "body: must be a non-empty string")
    status = d["status"]
    if status not in REVISION_STATUSES:
        raise _bad(record, path, f"status: {status!r} is not one of {', '.join(REVISION_STATUSES)}")
    raw_date = d["effective_date"]
    try:
        eff = raw_date if isinstance(raw_date, dt.date) else dt.date.fromisoformat(str(raw_date))
    except ValueError:
        raise _bad(record, path, f"effective_date: {raw_date!r} is not a date (YYYY-MM-DD)") from None
    intent = d.get("intent")
    if intent is not None:
        if not isinstance(intent, str) or not intent.strip():
            raise _bad(record, path, "intent: must be a non-empty string")
        if intents is not None and intent not in intents:
            raise _bad(record, path, f"intent: {intent!r} is not one of the spec's intents ({', '.join(intents)})")
    return KbRecord(record.line, aid, rev, title, body, status, eff, intent)


def parse_kb(data: bytes, *, path: str, intents: tuple[str, ...] | None = None) -> list[KbRecord]:
    """Parse and validate a KB file (JSONL or YAML, one revision per record); raise RecordError at the first bad one."""
    fmt = file_format(path, kind="KB") if Path(path).suffix else ".jsonl"
    records = read_records(data, path=path, fmt=fmt)
    if not records:
        raise RecordError("the file holds no KB revisions", path=path)
    out: list[KbRecord] = []
    seen: dict[tuple[str, int], int] = {}
    current_at: dict[str, int] = {}
    for record in records:
        kb = _parse_kb_record(record, path, intents)
        key = (kb.article_id, kb.revision)
        if key in seen:
            raise _bad(record, path, f"{kb.article_id} revision {kb.revision} appears twice (first at line {seen[key]})")
        seen[key] = kb.line
        if kb.status == "current":
            if kb.article_id in current_at:
                raise _bad(
                    record,
                    path,
                    f"{kb.article_id} has two current revisions in this file (the other at line {current_at[kb.article_id]}); "
                    "at most one revision of an article is current",
                )
            current_at[kb.article_id] = kb.line
        out.append(kb)
    return out


def import_kb(
    *, session: Session, data: bytes, path: str, intents: tuple[str, ...] | None = None
) -> KbImportResult:
    """Import KB revisions from a file in one transaction: create or update each (article, revision).

    Re-importing the same file changes nothing. When the file makes a revision current, a
    different revision of that article that is current in the database (and not in the file)
    becomes deprecated, so an article never has two current revisions.
    """
    records = parse_kb(data, path=path, intents=intents)
    result = KbImportResult()
    ids = sorted({r.article_id for r in records})
    existing = {
        (r.article_id, r.revision): r
        for r in session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all()
    }
    _upsert_articles(session, records, ids, result)
    original = {key: (r.title, r.body, r.status, r.effective_date) for key, r in existing.items()}
    _take_current_away(session, records, existing, result)
    _upsert_revisions(session, records, existing, original, result)
    return result


def _upsert_articles(session: Session, records: list[KbRecord], ids: list[str], result: KbImportResult) -> None:
    """Create the articles the file introduces; take a record's intent when it states another one."""
    articles = {a.article_id: a for a in session.exec(select(KbArticle).where(col(KbArticle.article_id).in_(ids))).all()}
    for rec in records:
        art = articles.get(rec.article_id)
        if art is None:
            art = KbArticle(article_id=rec.article_id, intent=rec.intent)
            session.add(art)
            articles[rec.article_id] = art
            result.articles_created += 1
        elif rec.intent and art.intent != rec.intent:
            art.intent = rec.intent
            session.add(art)
    session.flush()


def _take_current_away(
    session: Session, records: list[KbRecord], existing: dict[tuple[str, int], KbRevision], result: KbImportResult
) -> None:
    """Take "current" away from every stored row that loses it first, so the one-current index holds at every step."""
    in_file = {(r.article_id, r.revision) for r in records}
    new_current = {r.article_id for r in records if r.status == "current"}
    for key, row in existing.items():
        if row.status != "current":
            continue
        if key in in_file:
            rec = next(r for r in records if (r.article_id, r.revision) == key)
            if rec.status != "current":
                row.status = rec.status
                session.add(row)
        elif row.article_id in new_current:
            row.status = "deprecated"
            session.add(row)
            result.demoted.append(f"{row.article_id} r{row.revision}")
    session.flush()


def _upsert_revisions(
    session: Session,
    records: list[KbRecord],
    existing: dict[tuple[str, int], KbRevision],
    original: dict[tuple[str, int], tuple[str, str, str, dt.date]],
    result: KbImportResult,
) -> None:
    """Create the file's new revisions and update the changed ones (`original`: the stored values before the import)."""
    for rec in records:
        row = existing.get((rec.article_id, rec.revision))
        values = (rec.title, rec.body, rec.status, rec.effective_date)
        if row is None:
            session.add(
                KbRevision(
                    article_id=rec.article_id,
                    revision=rec.revision,
                    title=rec.title,
                    body=rec.body,
                    status=rec.status,
                    effective_date=rec.effective_date,
                )
            )
            result.created += 1
            continue
        if original[(rec.article_id, rec.revision)] == values:
            result.unchanged += 1
            continue
        row.title, row.body, row.status, row.effective_date = values
        session.add(row)
        result.updated += 1
    session.flush()
