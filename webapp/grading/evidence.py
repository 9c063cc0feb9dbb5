"""The evidence beside a draft: the KB texts it cites, and the model's own signals (blind until graded)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlalchemy.engine import Result
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.checks.models import DraftCheck
from webapp.core.blind import SignalsView, signals_visible
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.grading.models import Grade
from webapp.grading.reads import Item, run_all
from webapp.kb.models import KbRevision
from webapp.runs.models import Draft

_KB = table_of(KbRevision)
_CHECKS = table_of(DraftCheck)
_GRADES = table_of(Grade)
_DRAFTS = table_of(Draft)
_REVISIONS = core_select(_KB.c.article_id, _KB.c.revision, _KB.c.title, _KB.c.body, _KB.c.status).where(
    _KB.c.article_id.in_(bindparam("articles", expanding=True))
)
_DRAFT_CHECKS = (
    core_select(_CHECKS.c.key, _CHECKS.c.status, _CHECKS.c.reason)
    .where(_CHECKS.c.draft_id == bindparam("draft_id"))
    .order_by(_CHECKS.c.key)
)


@dataclass
class CitedKbText:
    """A KB revision a draft cites, with its text and status, as the grader reads it beside the draft."""

    article_id: str
    revision: int | None
    title: str | None
    body: str | None
    status: str | None  # None: that revision is not in the KB
    current_revision: int | None = None  # the article's current revision, when it has one

    @property
    def flagged(self) -> bool:
        """Tell whether the cited revision is not the current one (or missing)."""
        return self.status != "current"


def cited_kb_texts(*, session: Session, citations: list[dict[str, Any]] | None) -> list[CitedKbText]:
    """Return the KB revisions the citations name (the current one when no revision is given), in one query."""
    read = kb_read(citations)
    rows = run_all(session, read)[0] if read is not None else ()
    return kb_texts_from(citations, rows)


def kb_read(citations: list[dict[str, Any]] | None) -> Item | None:
    """The statement cited_kb_texts runs (None when nothing is cited), to run with others (webapp.grading.reads)."""
    articles = sorted({str(c.get("article_id", "")) for c in citations or []})
    return (_REVISIONS, {"articles": articles}) if articles else None


def kb_texts_from(citations: list[dict[str, Any]] | None, rows: Iterable[Any]) -> list[CitedKbText]:
    """Return cited_kb_texts' answer from the rows of kb_read's statement."""
    citations = citations or []
    revs: dict[tuple[str, int], Any] = {}
    current: dict[str, Any] = {}
    for rev in rows:
        revs[(rev.article_id, rev.revision)] = rev
        if rev.status == "current":
            current[rev.article_id] = rev
    out: list[CitedKbText] = []
    for c in citations:
        article = str(c.get("article_id", ""))
        number = c.get("revision")
        try:
            rev = revs.get((article, int(number))) if number is not None else current.get(article)
        except (TypeError, ValueError):
            rev = None
        now_current = current.get(article)
        out.append(
            CitedKbText(
                article_id=article,
                revision=rev.revision if rev else number,
                title=rev.title if rev else None,
                body=rev.body if rev else None,
                status=rev.status if rev else None,
                current_revision=now_current.revision if now_current else None,
            )
        )
    return out


@dataclass(frozen=True)
class JudgeVerdict:
    """The LLM judge's scores and rationale for a draft (the evaluator records them; grading only shows them)."""

    scores: dict[str, Any] | None
    rationale: str | None


@dataclass(frozen=True)
class JudgeLookup:
    """Where a draft's judge verdict is read: a statement with a `draft_id` parameter returning (scores, rationale).

    Grading cannot import the evaluator (it sits above grading): whoever shows signals passes the
    lookup in (webapp.app.flows.JUDGE). Without one, the signals have no judge.
    """

    stmt: Any

    def read(self, draft_id: int) -> Item:
        """The statement and parameters for one draft."""
        return (self.stmt, {"draft_id": draft_id})

    @staticmethod
    def verdict(row: Any) -> JudgeVerdict | None:
        """The verdict from the statement's row (None: no judge ran on the draft)."""
        return JudgeVerdict(scores=row.scores, rationale=row.rationale) if row is not None else None


@dataclass(frozen=True)
class ModelSignals:
    """What the machine thinks of a draft: its confidence, the LLM judge's scores, the automated checks."""

    confidence: float | None
    judge_scores: dict[str, Any] | None
    judge_rationale: str | None
    checks: list[Any]  # rows: key, status, reason

    @property
    def checks_passed(self) -> int:
        """Count the checks this draft passes."""
        return sum(1 for c in self.checks if c.status == "pass")

    @property
    def checks_applicable(self) -> int:
        """Count the checks that apply to this draft: "5/6 pass" is over these, not over all checks run."""
        return sum(1 for c in self.checks if c.status != "not_applicable")


def signals_view(
    *,
    session: Session,
    spec: EvalSpec,
    principal: Principal | None,
    run_id: int | None = None,
    draft_ids: Collection[int] = (),
) -> SignalsView:
    """Return which drafts' model signals the viewer sees (webapp.core.blind's rule, with the drafts they have graded).

    Looks only at the run `run_id` or the drafts `draft_ids`; asks the database nothing when the
    rule shows the viewer everything (a sighted role, or the spec shows signals before grading).
    """
    view = SignalsView.for_viewer(spec=spec, principal=principal, graded=())
    if view.everything or principal is None or (run_id is None and not draft_ids):
        return view
    stmt = core_select(_GRADES.c.draft_id).where(_GRADES.c.grader_id == principal.user_id)
    if run_id is not None:
        stmt = stmt.join(_DRAFTS, _DRAFTS.c.id == _GRADES.c.draft_id).where(_DRAFTS.c.run_id == run_id)
    if draft_ids:
        stmt = stmt.where(_GRADES.c.draft_id.in_(list(draft_ids)))
    graded = session.connection().execute(stmt).scalars().all()
    return SignalsView.for_viewer(spec=spec, principal=principal, graded=graded)


def model_signals(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    confidence: float | None,
    has_graded: bool,
    judge: JudgeLookup | None = None,
) -> ModelSignals | None:
    """Return the draft's model signals on the grading screen, or None while blind grading hides them (before the grader submits)."""
    reads = signals_reads(spec=spec, draft_id=draft_id, has_graded=has_graded, judge=judge)
    if reads is None:
        return None
    return signals_from(run_all(session, *reads), confidence=confidence, judge=judge)


def signals_reads(
    *, spec: EvalSpec, draft_id: int, has_graded: bool, judge: JudgeLookup | None = None
) -> list[Item] | None:
    """The statements model_signals runs (None while blind grading hides the signals), to send with others."""
    if not signals_visible(spec=spec, principal=None, has_graded=has_graded, grading=True):
        return None
    return [(_DRAFT_CHECKS, {"draft_id": draft_id}), *([judge.read(draft_id)] if judge is not None else [])]


def signals_from(
    results: Sequence[Result[Any]], *, confidence: float | None, judge: JudgeLookup | None = None
) -> ModelSignals:
    """Return model_signals' answer from the results of signals_reads' statements."""
    verdict = JudgeLookup.verdict(results[1].first()) if judge is not None else None
    return ModelSignals(
        confidence=confidence,
        judge_scores=verdict.scores if verdict else None,
        judge_rationale=verdict.rationale if verdict else None,
        checks=list(results[0].all()),
    )
