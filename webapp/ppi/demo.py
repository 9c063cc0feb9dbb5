"""Demo hook: demo-ppi, a second run over the demo dataset, judged, sampled before grading, partly graded.

Deterministic: the judge's scores, the human grades and the sample's seed all come from ctx.rng.
The judge is kinder than the people (+0.4 on tone and completeness), so the page shows the bias
it removes. The human grades are planted as final grades (as if agreed by two graders); a few
drawn drafts are left ungraded, so the page shows figures as provisional.
"""

from __future__ import annotations

import datetime as dt

from sqlmodel import Session

from webapp.demo.context import DemoContext
from webapp.grading.models import FinalGrade
from webapp.ppi.service import JudgeScoreIn, draw_sample, record_judge_scores, run_sample
from webapp.runs.models import Draft, Run
from webapp.spec import EvalSpec

RUN_NAME = "demo-ppi"
JUDGE_VERSION = "demo-judge-2026-11"
BUDGET = 25
LEFT_UNGRADED = 3


def _clip(x: float) -> float:
    return float(min(5.0, max(1.0, round(x))))


def seed(*, session: Session, spec: EvalSpec, ctx: DemoContext) -> None:
    """Create demo-ppi: the demo run's drafts again, judge scores for all, a sample, final grades for most of it."""
    rng = ctx.rng
    # Dated an hour before demo-run-1 so that demo-run-1 stays the newest run (the home page's gate
    # card and the walkthrough follow it); demo-ppi is the side run of the PPI page.
    created = ctx.run.created_at - dt.timedelta(hours=1)
    run = Run(
        name=RUN_NAME, dataset_id=ctx.run.dataset_id, model=ctx.run.model, prompt_version="v2-ppi", source="demo", created_at=created
    )
    session.add(run)
    session.flush()
    assert run.id is not None
    drafts: list[Draft] = []
    for original in ctx.drafts.values():
        if not original.draft_text or original.escalated:
            continue
        copy = Draft(
            run_id=run.id,
            case_pk=original.case_pk,
            draft_text=original.draft_text,
            citations=list(original.citations),
            intent=original.intent,
            confidence=original.confidence,
        )
        session.add(copy)
        drafts.append(copy)
    session.flush()
    quality: dict[int, float] = {}
    scores = []
    for d in drafts:
        assert d.id is not None
        q = rng.gauss(3.7, 0.8)
        quality[d.id] = q
        judged = {
            "factual_accuracy": "pass" if q + rng.gauss(0.3, 0.6) > 2.4 else "fail",
            "citation_relevance": _clip(q + rng.gauss(0.2, 0.6)),
            "tone": _clip(q + rng.gauss(0.4, 0.5)),
            "completeness": _clip(q + rng.gauss(0.4, 0.6)),
        }
        call = {"model": "demo-judge", "request": {"draft_id": d.id}, "response": judged}
        scores.append(JudgeScoreIn(draft_id=d.id, raw_calls=[call], **judged))
    record_judge_scores(session=session, run_id=run.id, judge_version=JUDGE_VERSION, scores=scores)
    draw_sample(session=session, run_id=run.id, budget=BUDGET, judge_version=JUDGE_VERSION, seed=rng.randrange(2**31 - 1))
    drawn = [s.draft_id for s in run_sample(session=session, run_id=run.id) or [] if s.drawn]
    for draft_id in drawn[LEFT_UNGRADED:]:
        q = quality[draft_id]
        session.add(
            FinalGrade(
                draft_id=draft_id,
                factual_accuracy="pass" if q + rng.gauss(0, 0.6) > 2.6 else "fail",
                citation_relevance=_clip(q + rng.gauss(0, 0.6)),
                tone=_clip(q + rng.gauss(0, 0.5)),
                completeness=_clip(q + rng.gauss(0, 0.6)),
                source="agreement",
            )
        )
    session.flush()
