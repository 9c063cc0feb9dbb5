"""Demo hook: grades of demo-run-1 by the two demo labelers, open and settled disagreements, references."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Mapping
from typing import Any

from sqlmodel import Session

from webapp.auth.service import Principal
from webapp.core.spec import EvalSpec
from webapp.grading.adjudication import list_adjudications, resolve_adjudication, return_grade
from webapp.grading.grades import grades_visible_to, record_grade
from webapp.grading.outcome import finalised
from webapp.grading.references import approve_reference, save_reference
from webapp.grading.scores import SCALE_KEYS, Scores, scores_of, validate_scores
from webapp.runs.demo_context import RunDemoContext
from webapp.runs.models import Draft

GRADED = 40
REFUND_CASE = "golden-unacceptable-refund"


# A reply's opening courtesy ("Thanks for reaching out.", "Sorry you are having trouble..."): never the claim a
# grader quotes as unsupported, and neither is the salutation line ("Hi Dana,").
_COURTESY = re.compile(
    r"^(hi|hello|dear|thanks|thank you|happy to help|glad to help|good question|let me help|sorry|we are sorry|i'm sorry"
    r"|i am sorry|anything else)\b",
    re.I,
)
# A sentence that declines ("I am not able to issue or promise a refund") states the policy: not a fabrication.
_DECLINES = re.compile(r"\b(not able to|cannot|can't|unable to)\b", re.I)
# The refund promise the demo plants ("I've processed your refund", "I have started the refund", "We will refund ...").
_PROMISE = re.compile(r"\b(started|processed|issued|will)\b[^.]*\brefund", re.I)


def _claim(text: str) -> str:
    """Return the sentence of the draft a grader quotes as unsupported, in the draft's own words: the refund promise
    when there is one, else the first sentence stating a checkable fact (a figure, a menu path, an article); never
    the greeting, a courtesy or a sentence declining (which states the policy)."""
    _salutation, blank, body = text.partition("\n\n")
    if not blank:
        body = text
    sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", body) if s.strip()]
    facts = [s for s in sentences if not _COURTESY.match(s) and not _DECLINES.search(s) and "\n" not in s] or [body.strip()]
    promise = next((s for s in facts if _PROMISE.search(s)), None)
    return promise or next((s for s in facts if re.search(r"\d|>|KB-", s)), facts[0])


def demo_scores(spec: EvalSpec, values: dict[str, Any], draft: Draft, rationale: str) -> Scores:
    """Return a grader's scores of a draft; a factual fail quotes the draft's promise as the unsupported claim."""
    data = {**values, "rationale": rationale}
    if values["factual_accuracy"] == "fail":
        data["unsupported_claim"] = _claim(draft.draft_text or "")
    return validate_scores(spec=spec, data=data)


def _pair_scores(rng: random.Random, spec: EvalSpec, *, disagree: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return two graders' scores of one draft: close to each other, or (disagree) apart on one criterion."""
    base: dict[str, Any] = {
        "factual_accuracy": "pass" if rng.random() < 0.85 else "fail",
        "citation_relevance": rng.randint(3, 5),
        "tone": rng.randint(3, 5),
        "completeness": rng.randint(3, 5),
    }
    other = dict(base)
    for key in SCALE_KEYS:
        if rng.random() < 0.3:
            other[key] = max(spec.rubric.criterion(key).pass_threshold or 3, min(5, other[key] + rng.choice((-1, 1))))
    if disagree:
        kind = rng.choice(("factual", "scale"))
        if kind == "factual":
            other["factual_accuracy"] = "fail" if base["factual_accuracy"] == "pass" else "pass"
        else:
            key = rng.choice(SCALE_KEYS)
            other[key] = 1 if base[key] >= 3 else 5
    return base, other


def seed(*, session: Session, spec: EvalSpec, ctx: RunDemoContext) -> None:
    """Plant about 40 double-graded drafts, several disagreements (some adjudicated) and golden references."""
    rng = ctx.rng
    alice, bob = ctx.users["labeler"], ctx.users["labeler2"]
    position = cases_by_pk(ctx.cases)
    gradable = sorted(
        (d for d in ctx.drafts.values() if d.draft_text and not d.escalated),
        key=lambda d: (position.get(d.case_pk, 0), d.id),
    )
    chosen = gradable[:GRADED]
    refund = ctx.drafts.get(REFUND_CASE)
    if refund is not None and refund.draft_text and refund not in chosen:
        chosen[-1] = refund
    start = dt.datetime.combine(ctx.today - dt.timedelta(days=20), dt.time(9, 0), tzinfo=dt.UTC)
    disagree_at = set(rng.sample(range(len(chosen)), k=min(8, len(chosen))))
    for i, draft in enumerate(chosen):
        when = start + dt.timedelta(hours=i * 11 + rng.randint(0, 5))
        base, other = _pair_scores(rng, spec, disagree=i in disagree_at)
        if draft is refund:
            base["factual_accuracy"] = other["factual_accuracy"] = "fail"
            base["completeness"], other["completeness"] = 3, 3
        for grader, values, rationale, at in (
            (alice, base, "Checked each claim against the cited articles.", when),
            (bob, other, "Graded against the rubric guidance.", when + dt.timedelta(hours=2)),
        ):
            scores = demo_scores(spec, values, draft, rationale)
            record_grade(session=session, spec=spec, draft_id=_id(draft), grader_id=_id(grader), scores=scores, now=at)
        finalised(session, _id(draft))
    _settle_some(session=session, spec=spec, ctx=ctx, start=start)
    _golden_references(session=session, ctx=ctx, start=start)
    ctx.extra["grading_open_adjudications"] = len(list_adjudications(session=session, status="open"))
    session.flush()


def _settle_some(*, session: Session, spec: EvalSpec, ctx: RunDemoContext, start: dt.datetime) -> None:
    """The lead settles a few disagreements and sends one grade back; the rest wait in the queue."""
    lead = ctx.users["lead"]
    adjudications = list_adjudications(session=session, status="open")
    for adj in adjudications[:3]:
        grades = grades_visible_to(session=session, draft_id=adj.draft_id, principal=_lead_principal(lead))
        pick = grades[ctx.rng.randrange(len(grades))]
        draft = session.get(Draft, adj.draft_id)
        assert draft is not None
        resolve_adjudication(
            session=session,
            spec=spec,
            adjudication_id=_id(adj),
            lead_id=_id(lead),
            scores=demo_scores(spec, scores_of(pick), draft, "Adjudicated."),
            note="Read both rationales; the KB supports this grade.",
            now=start + dt.timedelta(days=18),
        )
        finalised(session, adj.draft_id)
    if len(adjudications) > 4:
        adj = adjudications[3]
        grades = grades_visible_to(session=session, draft_id=adj.draft_id, principal=_lead_principal(lead))
        return_grade(
            session=session,
            adjudication_id=_id(adj),
            grade_id=_id(grades[-1]),
            lead_id=_id(lead),
            comment="Please re-read the scoring guidance for this criterion and grade again.",
            now=start + dt.timedelta(days=19),
        )


def _golden_references(*, session: Session, ctx: RunDemoContext, start: dt.datetime) -> None:
    """References for the golden cases: written by the labelers, the first ones approved by the lead."""
    alice, bob, lead = ctx.users["labeler"], ctx.users["labeler2"], ctx.users["lead"]
    golden = sorted((c for c in ctx.cases.values() if c.golden), key=lambda c: c.position)
    for n, case in enumerate(golden):
        author = alice if n % 2 == 0 else bob
        text = (
            case.reference
            or f"Reference reply for {case.case_id}: answer every question from the current KB articles."
        )
        v = save_reference(session=session, case_pk=_id(case), author_id=_id(author), text=text, now=start)
        if n < max(1, len(golden) // 2):
            approve_reference(
                session=session, reference_id=_id(v), lead_id=_id(lead), now=start + dt.timedelta(days=1)
            )

def _id(row: Any) -> int:
    """Return a stored row's id (the demo only passes rows it has flushed)."""
    assert row.id is not None
    return int(row.id)


def cases_by_pk(cases: Mapping[str, Any]) -> dict[int, int]:
    """Map case primary keys to their position in the dataset."""
    return {c.id: c.position for c in cases.values()}


def _lead_principal(user: Any) -> Principal:
    return Principal(user_id=user.id, email=user.email, name=user.name, roles=frozenset({"lead"}))
