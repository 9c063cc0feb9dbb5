"""The evidence beside a draft: the KB texts it cites, and the model's own signals (blind until graded)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam
from sqlalchemy import select as core_select
from sqlalchemy.sql import Executable
from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.checks.models import DraftCheck
from webapp.core.blind import SignalsView, signals_visible
from webapp.core.db import table_of
from webapp.core.spec import EvalSpec
from webapp.grading.models import Grade
from webapp.kb.models import KbRevision
from webapp.kb.snapshot import revision_states
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


@dataclass(frozen=True)
class KbText:
    """A KB revision as the grading page reads it."""

    article_id: str
    revision: int
    title: str | None
    body: str | None
    status: str


@dataclass
class CitedKbText:
    """A KB revision a draft cites, with its text and status, as the grader reads it beside the draft."""

    article_id: str
    revision: object  # the KB's revision number, else what the citation says (None: it names none)
    title: str | None
    body: str | None
    status: str | None  # None: that revision is not in the KB
    current_revision: int | None = None  # the article's current revision, when it has one

    @property
    def flagged(self) -> bool:
        """Tell whether the cited revision is not the current one (or missing)."""
        return self.status != "current"


# A draft's citations as stored (a JSON column): objects with an article_id and perhaps a revision.
Citations = Sequence[Mapping[str, object]]


def _revision_number(value: object) -> int | None:
    """Return a citation's revision as a number (None when it names none, or something that is not one)."""
    if isinstance(value, int | float | str):
        try:
            return int(value)
        except (ValueError, OverflowError):
            return None
    return None


def cited_kb_texts(*, session: Session, citations: Citations | None) -> list[CitedKbText]:
    """Return the KB revisions the citations name (the current one when no revision is given), in one query.

    Asks nothing when nothing is cited.
    """
    citations = citations or []
    articles = sorted({str(c.get("article_id", "")) for c in citations})
    rows = session.connection().execute(_REVISIONS, {"articles": articles}).all() if articles else []
    revs: dict[tuple[str, int], KbText] = {}
    current: dict[str, KbText] = {}
    states = revision_states((row.article_id, row.revision, row.status) for row in rows)  # stored revisions never change
    for row in rows:
        rev = KbText(row.article_id, row.revision, row.title, row.body, states[(row.article_id, row.revision)])
        revs[(rev.article_id, rev.revision)] = rev
        if rev.status == "current":
            current[rev.article_id] = rev
    out: list[CitedKbText] = []
    for c in citations:
        article = str(c.get("article_id", ""))
        named = c.get("revision")
        number = _revision_number(named)
        rev = current.get(article) if named is None else revs.get((article, number)) if number is not None else None
        now_current = current.get(article)
        out.append(
            CitedKbText(
                article_id=article,
                revision=rev.revision if rev else named,
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

    scores: dict[str, object] | None  # a JSON column: criterion -> score
    rationale: str | None


@dataclass(frozen=True)
class JudgeLookup:
    """Where a draft's judge verdict is read: a statement with a `draft_id` parameter returning (scores, rationale).

    Grading cannot import the evaluator (it sits above grading): whoever shows signals passes the
    lookup in (webapp.grading.hooks.judge_lookup, answered by the evaluator). Without one, the signals have no judge.
    """

    stmt: Executable

    def verdict_of(self, session: Session, draft_id: int) -> JudgeVerdict | None:
        """Return the judge's verdict on the draft (None: no judge ran on it)."""
        row = session.connection().execute(self.stmt, {"draft_id": draft_id}).first()
        return JudgeVerdict(scores=row.scores, rationale=row.rationale) if row is not None else None


@dataclass(frozen=True)
class CheckRow:
    """An automated check's result on a draft."""

    key: str
    status: str
    reason: str | None


@dataclass(frozen=True)
class ModelSignals:
    """What the machine thinks of a draft: its confidence, the LLM judge's scores, the automated checks."""

    confidence: float | None
    judge_scores: dict[str, object] | None
    judge_rationale: str | None
    checks: list[CheckRow]

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


def draft_checks(*, session: Session, draft_id: int) -> list[CheckRow]:
    """Return the automated checks' results on the draft, by check key."""
    rows = session.connection().execute(_DRAFT_CHECKS, {"draft_id": draft_id})
    return [CheckRow(key=r.key, status=r.status, reason=r.reason) for r in rows]


def model_signals(
    *,
    session: Session,
    spec: EvalSpec,
    draft_id: int,
    confidence: float | None,
    has_graded: bool,
    judge: JudgeLookup | None = None,
) -> ModelSignals | None:
    """Return the draft's model signals on the grading screen, or None while blind grading hides them (before the grader submits).

    Two reads when shown (the checks, the judge's verdict when a lookup is given), none when hidden.
    """
    if not signals_visible(spec=spec, principal=None, has_graded=has_graded, grading=True):
        return None
    checks = draft_checks(session=session, draft_id=draft_id)
    verdict = judge.verdict_of(session, draft_id) if judge is not None else None
    return ModelSignals(
        confidence=confidence,
        judge_scores=verdict.scores if verdict else None,
        judge_rationale=verdict.rationale if verdict else None,
        checks=checks,
    )
