"""Every way a KB changes: the file import, PUT/DELETE of one article, the bulk sync of a help-center export.

Stored revisions never change (issue 41): every path here only appends revisions (`_append`), and
`webapp.kb.models` refuses an UPDATE or DELETE of a stored revision outright. So:

- the same text again changes nothing (`unchanged`); "the same" is the title, body and status, and
  the effective date when the record gives one;
- a changed text becomes a new revision, numbered as the record says when that number is free and
  newer than every stored one, else the article's newest plus one (a re-imported file whose
  revision 2 was edited in the help center stores the edit as revision 3 and says so in `notes`);
  only the newest revision of an article in a file may carry such a change (an edited older one is
  refused: it would become the article's newest text);
- a deprecation or a deletion is a new revision with that status (title and body kept from the
  newest revision when the request leaves them out); what each older revision is now follows from
  the newest one (webapp.kb.snapshot.revision_states).

Each request is one transaction, checked whole before anything is written: a bad record refuses
the request naming its index (or file line) and field, nothing stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sqlmodel import Session, col, select

from webapp.core.timeutil import utcnow
from webapp.datasets.records import RecordError
from webapp.kb.models import KbArticle, KbRevision, RevisionStatus
from webapp.kb.records import FieldProblem, KbRecord, check_together, parse_kb, parse_record
from webapp.kb.service import get_article

Outcome = Literal["created", "revised", "unchanged", "deprecated", "deleted"]
OUTCOMES: tuple[Outcome, ...] = ("created", "revised", "unchanged", "deprecated", "deleted")
MAX_LISTED = 20  # bad records named in one refusal (the total is said too)


@dataclass(frozen=True)
class RecordProblem:
    """One bad record of a request: its 0-based index, its field, the message (and its file, for a file's record)."""

    index: int
    field: str
    message: str
    kind: str = "value_error"
    source: str = ""  # the file a record came from ("" for a JSON record)
    line: int = 0  # its line in that file (0: unknown)


class KbSyncInvalid(ValueError):
    """A request with bad records: every problem (the route lists the first MAX_LISTED), nothing stored."""

    def __init__(self, problems: list[RecordProblem]) -> None:
        super().__init__("; ".join(f"record {p.index}: {p.message}" for p in problems[:3]))
        self.problems = problems


@dataclass
class ArticleOutcome:
    """What one request did to one article: the outcome, its newest revision, its state now."""

    article_id: str
    outcome: Outcome
    revision: int
    state: str


@dataclass
class KbSyncResult:
    """What a sync or import did: one outcome per article, how many revisions it stored, and notes."""

    articles: list[ArticleOutcome] = field(default_factory=list)
    revisions: int = 0
    notes: list[str] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        """Return how many articles had this outcome."""
        return sum(1 for a in self.articles if a.outcome == outcome)

    @property
    def summary(self) -> str:
        """Return the one line the CLI and the admin page print."""
        counts = ", ".join(f"{self.count(o)} {o}" for o in OUTCOMES)
        line = f"{self.revisions} revision(s) stored; articles: {counts}"
        return line + ("; " + "; ".join(self.notes) if self.notes else "")


Content = tuple[str, str, RevisionStatus, dt.date]


def _same(rec: KbRecord, title: str, body: str, stored: Content) -> bool:
    return (title, body, rec.status) == stored[:3] and (rec.effective_date is None or rec.effective_date == stored[3])


@dataclass
class _Article:
    """One article while a request is applied: its revisions (stored and appended) by number."""

    article_id: str
    row: KbArticle | None
    revisions: dict[int, Content]
    appended: list[int] = field(default_factory=list)

    @property
    def newest(self) -> int:
        return max(self.revisions, default=0)


def _load(session: Session, ids: Sequence[str]) -> dict[str, _Article]:
    arts = {a.article_id: a for a in session.exec(select(KbArticle).where(col(KbArticle.article_id).in_(ids))).all()} if ids else {}
    out = {aid: _Article(aid, arts.get(aid), {}) for aid in ids}
    if ids:
        for r in session.exec(select(KbRevision).where(col(KbRevision.article_id).in_(ids))).all():
            out[r.article_id].revisions[r.revision] = (r.title, r.body, r.status, r.effective_date)
    return out


def _plan(art: _Article, recs: list[KbRecord], today: dt.date, notes: list[str]) -> list[RecordProblem]:
    """Decide each record of one article (appending to `art.revisions`); return the records refused."""
    problems: list[RecordProblem] = []
    last_numbered = max((r.revision for r in recs if r.revision is not None), default=None)
    for rec in sorted(recs, key=lambda r: (r.revision is None, r.revision or 0)):
        newest = art.revisions.get(art.newest)
        title, body = rec.title or (newest[0] if newest else None), rec.body or (newest[1] if newest else None)
        if title is None or body is None:
            missing = "title" if title is None else "body"
            problems.append(RecordProblem(rec.index, missing, f"missing required field: {missing} (the KB has no {rec.article_id} to take it from)", "missing", rec.source, rec.line))
            continue
        if newest is not None and _same(rec, title, body, newest):
            continue  # the article's newest text already: nothing to do (also a retried change)
        stored = art.revisions.get(rec.revision) if rec.revision is not None else None
        if stored is not None and _same(rec, title, body, stored):
            continue
        number = art.newest + 1
        if rec.revision is not None and stored is None:
            if rec.revision < art.newest and rec.status == "current":
                problems.append(RecordProblem(rec.index, "status", (
                    f"{rec.article_id} revision {rec.revision} cannot be current: the KB holds the newer revision {art.newest}"), source=rec.source, line=rec.line))
                continue
            number = rec.revision
        elif stored is not None:
            if rec.revision != last_numbered:
                problems.append(RecordProblem(rec.index, "revision", (
                    f"{rec.article_id} revision {rec.revision} is stored with another text, and stored revisions never change; "
                    "only an article's newest revision in a file may carry a change (stored as a new revision)"), source=rec.source, line=rec.line))
                continue
            notes.append(f"{rec.article_id} revision {rec.revision} differs from the stored one: stored as revision {number}")
        art.revisions[number] = (title, body, rec.status, rec.effective_date or today)
        art.appended.append(number)
    return problems


def _outcome(art: _Article) -> Outcome:
    if not art.appended:
        return "unchanged"
    if art.row is None:
        return "created"
    status = art.revisions[art.newest][2] if art.newest in art.appended else "current"
    return "revised" if status == "current" else "deleted" if status == "deleted" else "deprecated"


def apply_records(
    *, session: Session, records: list[KbRecord], delete_missing: bool = False, today: dt.date | None = None
) -> KbSyncResult:
    """Append the revisions the records ask for (all or nothing); with delete_missing, delete every article they leave out."""
    today = today or utcnow().date()
    problems = [RecordProblem(r.index, p.field, p.message, p.kind, r.source, r.line) for r, p in check_together(records)]
    by_article: dict[str, list[KbRecord]] = {}
    for rec in records:
        by_article.setdefault(rec.article_id, []).append(rec)
    ids = sorted(by_article)
    if delete_missing:
        ids = sorted(set(ids) | set(session.exec(select(KbArticle.article_id)).all()))
    arts = _load(session, ids)
    result = KbSyncResult()
    for aid in ids:
        art = arts[aid]
        if aid in by_article:
            problems += _plan(art, by_article[aid], today, result.notes)
        elif art.revisions and art.revisions[art.newest][2] != "deleted":
            title, body, _, _ = art.revisions[art.newest]
            art.revisions[art.newest + 1] = (title, body, "deleted", today)
            art.appended.append(art.newest)
    if problems:
        raise KbSyncInvalid(sorted(problems, key=lambda p: p.index))
    intents = {r.article_id: r.intent for r in records if r.intent}
    for aid in ids:
        art = arts[aid]
        if aid in by_article or art.appended:
            result.articles.append(ArticleOutcome(aid, _outcome(art), art.newest, art.revisions[art.newest][2]))
        _store_article(session, art, intents.get(aid))
        result.revisions += len(art.appended)
    session.flush()
    return result


def _store_article(session: Session, art: _Article, intent: str | None) -> None:
    """Create the article if new, take a stated intent (the article's, not a revision's), append its new revisions."""
    if art.row is None and art.appended:
        art.row = KbArticle(article_id=art.article_id, intent=intent)
        session.add(art.row)
        session.flush()
    elif art.row is not None and intent and art.row.intent != intent:
        art.row.intent = intent
        session.add(art.row)
    for number in art.appended:
        title, body, status, effective = art.revisions[number]
        session.add(KbRevision(article_id=art.article_id, revision=number, title=title, body=body, status=status, effective_date=effective))


# --- the three entry points ---------------------------------------------------------------------------


def import_kb(*, session: Session, data: bytes, path: str, intents: tuple[str, ...] | None = None) -> KbSyncResult:
    """Import a KB file in one transaction (the rules above); raise RecordError naming FILE:LINE."""
    records = parse_kb(data, path=path, intents=intents)
    try:
        return apply_records(session=session, records=records)
    except KbSyncInvalid as exc:
        first = exc.problems[0]
        rec = records[first.index]
        raise RecordError(f"record {first.index + 1}: {first.message}", path=path, line=rec.line) from None


def parse_requests(items: Sequence[object], *, intents: tuple[str, ...] | None = None) -> list[KbRecord]:
    """Check a request's records (JSON values); raise KbSyncInvalid naming every bad one's index and field."""
    records: list[KbRecord] = []
    problems: list[RecordProblem] = []
    for i, item in enumerate(items):
        try:
            records.append(parse_record(item, index=i, required=("article_id",), intents=intents))
        except FieldProblem as exc:
            problems.append(RecordProblem(i, exc.field, exc.message, exc.kind))
    if problems:
        raise KbSyncInvalid(problems)
    return records


def files_records(files: Sequence[tuple[str, bytes]], *, offset: int, intents: tuple[str, ...] | None = None) -> list[KbRecord]:
    """Parse a help-center export's files (JSONL, YAML or JSON, the import's format); raise KbSyncInvalid at a bad file."""
    out: list[KbRecord] = []
    for name, data in files:
        try:
            parsed = parse_kb(data, path=name, intents=intents, formats=(".jsonl", ".yaml", ".yml", ".json"), required=("article_id",))
        except RecordError as exc:
            problem = RecordProblem(offset + len(out), "content", exc.location, source=name, line=exc.line or 0)
            raise KbSyncInvalid([problem]) from None
        out += [replace(r, index=offset + len(out) + i) for i, r in enumerate(parsed)]
    return out


def delete_article(*, session: Session, article_id: str, today: dt.date | None = None) -> ArticleOutcome:
    """Delete an article: a new revision with status deleted (the newest text kept); raise KbNotFound."""
    get_article(session=session, article_id=article_id)
    rec = KbRecord(0, 0, article_id, None, None, None, "deleted", None, None)
    return apply_records(session=session, records=[rec], today=today).articles[0]
