"""Demo hook: demo-ppi, a second run over the demo dataset, judged, sampled before grading, partly graded;
and three production weeks (prod-2026-W45..W47) for the weekly quality chart on /metrics.

Deterministic: the judge's scores, the human grades and the sample's seed all come from ctx.rng.
The judge pass is planted as `prompt-evaluator judge-run` stores it with its defaults and a second
judge (5 calls at temperature 0.7, a second judge, log-prob expectations, calls and cost per
draft), in the world webapp/ppi/demo_judge.py describes. The judge is kinder than the people (+0.4
on tone and completeness), so the page shows the bias it removes. Two labelers grade each drawn draft alike (through the grading service, so the batch
pages count their grades and the agreement makes the final grade); a few drawn drafts are left
ungraded, so the page shows figures as provisional.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence

from sqlmodel import Session, col, select

from webapp.core import reactions
from webapp.core.spec import EvalSpec
from webapp.grading.demo import demo_scores
from webapp.grading.grades import record_grade
from webapp.grading.outcome import finalised
from webapp.ppi import until_decided
from webapp.ppi.demo_judge import PlantedDraft, plant_draft
from webapp.ppi.production import create_week_run, week_of
from webapp.ppi.service import JudgeScoreIn, draw_sample, record_judge_scores, run_sample
from webapp.runs.demo_context import RunDemoContext
from webapp.runs.models import Draft, Run

RUN_NAME = "demo-ppi"
JUDGE_VERSION = "demo-judge-2026-11"
BUDGET = 35  # at least 30 grades (webapp.ppi.anytime.MIN_GRADES) so that the sequence can call the clear figures
LEFT_UNGRADED = 3


def plant_judged_sample(
    *,
    session: Session,
    rng: random.Random,
    run_id: int,
    drafts: Sequence[Draft],
    quality: Callable[[], float],
    citation_bias: float,
    budget: float,
    ungraded: int,
    spec: EvalSpec,
    graders: tuple[int, int],
    now: dt.datetime | None = None,
    until_decided_by: int | None = None,
) -> None:
    """Give each draft a latent quality, the judges' signals of it (webapp/ppi/demo_judge.py), draw the sample, and
    have the two graders grade the drawn drafts but the first `ungraded` alike (their agreement is the final grade;
    the others wait: figures provisional).

    `until_decided_by` (a lead's id): the run is set to grade until decided right after the draw, its drafts are
    graded in the queue's draw order, and the reactions run after each final grade, so every call is stored on the
    grade it rested on (as on a server); grading stops when the queue closes, or with the last `ungraded` waiting."""
    planted: dict[int, PlantedDraft] = {}
    scores = []
    for d in drafts:
        assert d.id is not None
        p = plant_draft(rng, draft_id=d.id, quality=quality(), citation_bias=citation_bias)
        planted[d.id] = p
        scores.append(
            JudgeScoreIn(
                draft_id=d.id, raw_calls=[dict(r) for r in p.raw_calls], signals=p.signals(), calls=len(p.raw_calls),
                cost_usd=p.cost_usd, **p.calls[0],
            )
        )  # fmt: skip
    record_judge_scores(session=session, run_id=run_id, judge_version=JUDGE_VERSION, scores=scores)
    draw_sample(session=session, run_id=run_id, budget=budget, judge_version=JUDGE_VERSION, seed=rng.randrange(2**31 - 1), now=now)
    drawn = [s.draft_id for s in run_sample(session=session, run_id=run_id) or [] if s.drawn]
    to_grade = drawn[ungraded:]
    if until_decided_by is not None:
        until_decided.set_until_decided(session=session, run_id=run_id, user_id=until_decided_by, now=now, spec=spec)
        order = until_decided.draw_order(session=session, run_id=run_id)
        to_grade = order[: len(order) - ungraded]
    by_id = {d.id: d for d in drafts}
    for draft_id in to_grade:
        if until_decided_by is not None and not until_decided.is_open(session=session, run_id=run_id):
            break  # the queue closed itself: decided (or at the cap)
        values = planted[draft_id].human()
        scores_in = demo_scores(spec, values, by_id[draft_id], "Graded against the rubric guidance.")
        for grader_id in graders:
            record_grade(session=session, spec=spec, draft_id=draft_id, grader_id=grader_id, scores=scores_in, now=now)
        if until_decided_by is not None:
            finalised(session, draft_id)  # the "draft_finalised" fact a grading page records
            reactions.run_in_session(session, spec)  # the call updated after this final grade, as on a server
    session.flush()


def _graders(ctx: RunDemoContext) -> tuple[int, int]:
    """The two labelers who grade the demo's samples."""
    a, b = ctx.users["labeler"].id, ctx.users["labeler2"].id
    assert a is not None and b is not None
    return a, b


def seed(*, session: Session, spec: EvalSpec, ctx: RunDemoContext) -> None:
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
    assert run.id is not None
    plant_judged_sample(
        session=session, rng=rng, run_id=run.id, drafts=drafts, quality=lambda: rng.gauss(3.7, 0.8),
        citation_bias=0.2, budget=BUDGET, ungraded=LEFT_UNGRADED, spec=spec, graders=_graders(ctx),
        until_decided_by=ctx.users["lead"].id,
    )
    seed_production_weeks(session=session, spec=spec, ctx=ctx)


# --- production weeks --------------------------------------------------------------------------------

# (ISO week offset from the pilot's first week, the planted quality of its drafts, drawn drafts left ungraded)
# Week 0 (the pilot's first week): good drafts, fully graded: above the target (level 4.4: with the noisier single
# call of the 5-call judge, each lower bound clears 3.5).
# Week 1 (the model change): worse drafts, fully graded: the interval lies below the target, the alert fires.
# Week 2: good again, three drawn drafts still ungraded: provisional.
PRODUCTION_WEEKS: tuple[tuple[int, float, int], ...] = ((0, 4.6, 0), (1, 2.6, 0), (2, 3.9, 3))
PRODUCTION_CAP = 60  # drafts judged per demo week (the setting's default is 1000; the demo keeps seeding quick)
PRODUCTION_BUDGET = 25


def seed_production_weeks(*, session: Session, spec: EvalSpec, ctx: RunDemoContext) -> list[str]:
    """Create the demo's production weeks: judged drafts, a sample, planted human grades; return the week labels."""
    rng = ctx.rng
    first = week_of(spec.online_metrics.pilot.start)
    labels = []
    for offset, level, ungraded in PRODUCTION_WEEKS:
        week = week_of(first.start + dt.timedelta(weeks=offset))
        made_at = dt.datetime.combine(week.end + dt.timedelta(days=1), dt.time(9), tzinfo=dt.UTC)
        made = create_week_run(
            session=session, week=week.label, budget=PRODUCTION_BUDGET, cap=PRODUCTION_CAP,
            seed=rng.randrange(2**31 - 1), created_by=ctx.users["lead"].id, now=made_at,
        )
        run_id = made.week.run_id
        drafts = session.exec(select(Draft).where(Draft.run_id == run_id).order_by(col(Draft.id))).all()
        plant_judged_sample(
            session=session, rng=rng, run_id=run_id, drafts=drafts, quality=lambda level=level: rng.gauss(level, 0.7),
            citation_bias=0.3, budget=PRODUCTION_BUDGET, ungraded=ungraded, spec=spec, graders=_graders(ctx), now=made_at,
        )
        labels.append(week.label)
    return labels
