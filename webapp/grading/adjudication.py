"""Adjudication of disagreements: the lead's final grade, or a grade returned for rework."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.core.timeutil import utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.errors import GradeInvalid, GradeLocked, NotFound
from webapp.grading.evidence import CitedKbText, JudgeLookup, ModelSignals, cited_kb_texts, model_signals
from webapp.grading.grades import add_history, grades_visible_to, lock_draft
from webapp.grading.item_reads import user_names
from webapp.grading.models import (
    Adjudication,
    FinalGrade,
    Grade,
)
from webapp.grading.outcome import upsert_final
from webapp.grading.scores import (
    FACTUAL_KEY,
    Scores,
    ScoreValues,
    refuse_claim_on_pass,
    scores_of,
    validate_scores,
)
from webapp.runs.models import Draft
from webapp.web.page_view import PageView


def list_adjudications(*, session: Session, status: str | None = "open") -> list[Adjudication]:
    """Return adjudications with the status (all when None), oldest first."""
    stmt = select(Adjudication)
    if status:
        stmt = stmt.where(Adjudication.status == status)
    return list(session.exec(stmt.order_by(col(Adjudication.opened_at), col(Adjudication.id))))


def decide_adjudication(
    *, session: Session, spec: EvalSpec, adjudication_id: int, lead_id: int, data: Mapping[str, object], note: str
) -> FinalGrade:
    """Resolve a disagreement from the lead's raw scores (the page's form or the API's JSON), checked against the rubric.

    The one path of the adjudication page and the API; each records grading.outcome.finalised after it.
    A final 'pass' that still carries an unsupported claim is refused (naming the field) rather than
    having the claim dropped silently: it is most often grader A's claim left in the form after
    "Take A's scores" and a change of mind, and the lead must say which of the two they mean.
    """
    refuse_claim_on_pass(data)
    scores = validate_scores(spec=spec, data=data)
    return resolve_adjudication(
        session=session, spec=spec, adjudication_id=adjudication_id, lead_id=lead_id, scores=scores, note=note
    )


def resolve_adjudication(
    *,
    session: Session,
    spec: EvalSpec,
    adjudication_id: int,
    lead_id: int,
    scores: Scores,
    note: str,
    now: dt.datetime | None = None,
) -> FinalGrade:
    """Set the final grade of a disagreeing draft with the lead's note; its grades are then locked."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    if adj is None:
        raise NotFound(f"adjudication {adjudication_id} does not exist")
    lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    note = (note or "").strip()
    if not note:
        raise GradeInvalid("note: explain the decision in a note", field="note")
    final = upsert_final(
        session,
        adj.draft_id,
        {
            FACTUAL_KEY: scores.factual_accuracy,
            "citation_relevance": float(scores.citation_relevance),
            "tone": float(scores.tone),
            "completeness": float(scores.completeness),
            "source": "adjudication",
            "decided_by": lead_id,
            "note": note,
            "decided_at": now,
        },
    )
    adj.status = "resolved"
    adj.note = note
    adj.resolved_at = now
    adj.resolved_by = lead_id
    session.add(adj)
    session.flush()
    return final


def return_grade(
    *,
    session: Session,
    adjudication_id: int,
    grade_id: int,
    lead_id: int,
    comment: str,
    now: dt.datetime | None = None,
) -> Grade:
    """Send one grade of a disagreeing draft back to its grader with a comment; it shows in their queue."""
    now = now or utcnow()
    adj = session.get(Adjudication, adjudication_id)
    grade = session.get(Grade, grade_id)
    if adj is None or grade is None or grade.draft_id != adj.draft_id:
        raise NotFound(f"grade {grade_id} is not part of adjudication {adjudication_id}")
    lock_draft(session, adj.draft_id)
    session.refresh(adj)
    if adj.status not in ("open", "rework"):
        raise GradeLocked(f"adjudication {adjudication_id} is {adj.status}, not open")
    comment = (comment or "").strip()
    if not comment:
        raise GradeInvalid("comment: tell the grader what to look at again", field="comment")
    before = scores_of(grade)
    grade.status = "returned"
    grade.return_comment = comment
    grade.updated_at = now
    session.add(grade)
    session.flush()
    add_history(session, grade, lead_id, "return", before, comment, now)
    adj.status = "rework"
    session.add(adj)
    session.flush()
    return grade


# ---------------------------------------------------------------------------------------------
# The adjudication page's view

_CLAIM_QUOTES = "\"'“”"
ADJUDICATION_STATES = ("open", "rework", "resolved", "dissolved")


def highlight(text: str, claims: list[tuple[str, str]]) -> list[tuple[str, str | None]]:
    """Split text into (segment, label) pairs where each quoted claim is found (whitespace and case forgiven)."""
    found: dict[tuple[int, int], list[str]] = {}
    for claim, label in claims:
        words = claim.strip().strip(_CLAIM_QUOTES).split()
        if not words:
            continue
        for m in re.finditer(r"\s+".join(re.escape(w) for w in words), text, flags=re.IGNORECASE):
            found.setdefault((m.start(), m.end()), []).append(label)
    # Both graders quoting the same words is one mark with both letters.
    spans = sorted((start, end, "+".join(labels)) for (start, end), labels in found.items())
    out: list[tuple[str, str | None]] = []
    pos = 0
    for start, end, label in spans:
        if start < pos:  # overlapping quotes: the first one wins
            continue
        if start > pos:
            out.append((text[pos:start], None))
        out.append((text[start:end], label))
        pos = end
    if pos < len(text):
        out.append((text[pos:], None))
    return out


@dataclass(frozen=True)
class AdjudicationItem:
    """One disagreement as the lead reads it: the draft, its case, every grade (lettered), and what the graders saw."""

    adj: Adjudication
    draft: Draft
    case: EvalCase | None
    grades: list[Grade]
    letters: dict[int | None, str]  # grade id -> A, B (3, 4... beyond two graders)
    final: FinalGrade | None
    cited: list[CitedKbText]
    segments: list[tuple[str, str | None]]  # the draft's text, the graders' quoted claims marked by letter
    prefill: ScoreValues  # the grade "Take A's scores" copied into the final-grade form (empty: none)
    taken_from: str | None
    signals: ModelSignals | None


@dataclass(frozen=True)
class AdjudicationQueueView(PageView):
    """The disagreements in one state, the counts per state, and the names the page shows."""

    items: list[AdjudicationItem]
    status: str
    counts: dict[str, int]
    users: dict[int, str]
    flash: str | None = None
    error: str | None = None


def _adjudication_item(
    *, session: Session, spec: EvalSpec, principal: Principal, adj: Adjudication, take: str, judge: JudgeLookup | None
) -> AdjudicationItem | None:
    """Read one disagreement with everything the graders saw (None when its draft is gone)."""
    draft = session.get(Draft, adj.draft_id)
    if draft is None:
        return None
    grades = grades_visible_to(session=session, draft_id=adj.draft_id, principal=principal)
    letters = {g.id: "AB"[i] if i < 2 else str(i + 1) for i, g in enumerate(grades)}
    claims = [(g.unsupported_claim, letters[g.id]) for g in grades if g.unsupported_claim]
    taken = next((g for g in grades if take == f"{adj.id}:{g.id}"), None)
    return AdjudicationItem(
        adj=adj,
        draft=draft,
        case=session.get(EvalCase, draft.case_pk),
        grades=grades,
        letters=letters,
        final=session.exec(select(FinalGrade).where(FinalGrade.draft_id == adj.draft_id)).first(),
        cited=cited_kb_texts(session=session, citations=draft.citations),
        segments=highlight(draft.draft_text or "", claims),
        prefill=scores_of(taken) if taken is not None else {},
        taken_from=letters[taken.id] if taken is not None else None,
        signals=model_signals(
            session=session, spec=spec, draft_id=adj.draft_id, confidence=draft.confidence, has_graded=True, judge=judge
        ),
    )


def adjudication_queue_view(
    *,
    session: Session,
    spec: EvalSpec,
    principal: Principal,
    status: str,
    take: str = "",
    judge: JudgeLookup | None = None,
) -> AdjudicationQueueView:
    """Return the disagreements in a state with everything the graders saw, both grades, and the counts per state.

    `take` ("<adjudication id>:<grade id>") prefills the final-grade form with that grade.
    """
    items: list[AdjudicationItem] = []
    user_ids: set[int] = set()
    for adj in list_adjudications(session=session, status=status):
        item = _adjudication_item(session=session, spec=spec, principal=principal, adj=adj, take=take, judge=judge)
        if item is None:
            continue
        user_ids.update(g.grader_id for g in item.grades)
        if item.final is not None and item.final.decided_by:
            user_ids.add(item.final.decided_by)
        if adj.resolved_by:
            user_ids.add(adj.resolved_by)
        items.append(item)
    counts = dict(
        session.exec(select(Adjudication.status, func.count()).group_by(col(Adjudication.status))).all()
    )
    return AdjudicationQueueView(
        items=items,
        status=status,
        counts={s: int(counts.get(s, 0)) for s in ADJUDICATION_STATES},
        users=user_names(session=session, user_ids=user_ids),
    )
