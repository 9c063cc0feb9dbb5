"""Judge scores per draft, and a run's sample drawn before grading (stored append-only)."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy import func
from sqlmodel import Session, col, select

from webapp.core.facts import record_fact
from webapp.core.timeutil import utcnow
from webapp.datasets.models import EvalCase
from webapp.grading.models import FinalGrade, Grade
from webapp.grading.plan import add_to_plan
from webapp.ppi import until_decided
from webapp.ppi.judge_signals import JudgeSignals, check_signals
from webapp.ppi.models import PpiDraw, PpiErrorModel, PpiJudgeScore
from webapp.ppi.sampler import (
    FORCED_STRATA,
    ErrorModel,
    FrozenDesign,
    GradedExample,
    combined_pi,
    draw,
    fit_error_model,
    frozen_design,
    inclusion_probabilities,
)
from webapp.regression.models import RegressionCase
from webapp.runs.models import Draft, Run

CRITERIA: tuple[str, ...] = ("factual_accuracy", "citation_relevance", "tone", "completeness")
SCALE_CRITERIA: tuple[str, ...] = ("citation_relevance", "tone", "completeness")
SEED_LIMIT = 2**31 - 1  # fits the integer column on both databases


class PpiError(ValueError):
    """A request the judge pass or the sampler cannot carry out; the message starts with the field."""


def overall_score(factual_accuracy: str, citation_relevance: float, tone: float, completeness: float) -> float:
    """Return one 1-5 score for a draft: the mean of its four criteria, factual pass counting 5 and fail 1."""
    factual = 5.0 if factual_accuracy == "pass" else 1.0
    return (factual + float(citation_relevance) + float(tone) + float(completeness)) / 4.0


# --- the judge pass ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgeScoreIn:
    """The judge's verdict on one draft, as the judge pass hands it over.

    The four criteria are the primary judge's first parsed call; `signals` holds every parsed call,
    the second judge and the log-prob expectation (webapp/ppi/judge_signals.py), `calls` the calls
    made (failed ones included) and `cost_usd` their cost (None when a model has no price).
    """

    draft_id: int
    factual_accuracy: str
    citation_relevance: float
    tone: float
    completeness: float
    raw_calls: list[dict[str, Any]] = field(default_factory=list)
    signals: JudgeSignals | None = None
    calls: int = 1
    cost_usd: float | None = None


def record_judge_scores(
    *, session: Session, run_id: int, judge_version: str, scores: Sequence[JudgeScoreIn], scale: tuple[int, int] = (1, 5)
) -> int:
    """Store the judge's scores of a run's drafts under a frozen judge version, all or nothing; return how many."""
    version = judge_version.strip()
    if not version:
        raise PpiError("judge_version: name the frozen judge version")
    run_drafts = set(session.exec(select(Draft.id).where(Draft.run_id == run_id)).all())
    existing = set(
        session.exec(
            select(PpiJudgeScore.draft_id).where(PpiJudgeScore.run_id == run_id, PpiJudgeScore.judge_version == version)
        ).all()
    )
    seen: set[int] = set()
    for i, s in enumerate(scores):
        where = f"scores[{i}]"
        if s.draft_id not in run_drafts:
            raise PpiError(f"{where}.draft_id: draft {s.draft_id} is not in run {run_id}")
        if s.draft_id in seen or s.draft_id in existing:
            raise PpiError(f"{where}.draft_id: draft {s.draft_id} already has a score from judge {version!r}")
        seen.add(s.draft_id)
        if s.factual_accuracy not in ("pass", "fail"):
            raise PpiError(f"{where}.factual_accuracy: expected pass or fail, got {s.factual_accuracy!r}")
        for name in SCALE_CRITERIA:
            value = float(getattr(s, name))
            if not scale[0] <= value <= scale[1]:
                raise PpiError(f"{where}.{name}: {value} is outside {scale[0]}-{scale[1]}")
        _check_judge_extras(s, where, scale)
    now = utcnow()
    for s in scores:
        session.add(
            PpiJudgeScore(
                run_id=run_id,
                draft_id=s.draft_id,
                judge_version=version,
                factual_accuracy=s.factual_accuracy,
                citation_relevance=float(s.citation_relevance),
                tone=float(s.tone),
                completeness=float(s.completeness),
                raw_calls=list(s.raw_calls),
                signals=dict(s.signals) if s.signals is not None else None,
                calls=s.calls,
                cost_usd=s.cost_usd,
                created_at=now,
            )
        )
    session.flush()
    return len(scores)


def _check_judge_extras(s: JudgeScoreIn, where: str, scale: tuple[int, int]) -> None:
    """Refuse signals off their scales, fewer than one call, or a negative cost; the message names the field."""
    if s.calls < 1:
        raise PpiError(f"{where}.calls: at least 1, got {s.calls}")
    if s.cost_usd is not None and not (s.cost_usd >= 0 and np.isfinite(s.cost_usd)):
        raise PpiError(f"{where}.cost_usd: a cost of 0 or more, got {s.cost_usd}")
    if s.signals is not None:
        try:
            check_signals(s.signals, f"{where}.signals", scale)
        except ValueError as exc:
            raise PpiError(str(exc)) from None


def judge_scores(*, session: Session, run_id: int, judge_version: str) -> dict[int, PpiJudgeScore]:
    """Return the judge's scores of a run's drafts under one version, by draft id."""
    rows = session.exec(
        select(PpiJudgeScore).where(PpiJudgeScore.run_id == run_id, PpiJudgeScore.judge_version == judge_version)
    ).all()
    return {r.draft_id: r for r in rows}


# --- the sampler ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DraftFacts:
    """What the sampler reads of one draft: its stratum, whether it must be graded, the judge's score."""

    draft_id: int
    ticket: str
    stratum: str
    forced: bool
    judge_score: float


def gradable_drafts(*, session: Session, run_id: int) -> list[tuple[Draft, EvalCase]]:
    """Return the run's gradable drafts with their cases, in id order: escalations and fallbacks (no text) are left out.

    The judge pass judges exactly these drafts and the sampler samples exactly these.
    """
    rows = session.exec(
        select(Draft, EvalCase)
        .join(EvalCase, col(EvalCase.id) == Draft.case_pk)
        .where(Draft.run_id == run_id, col(Draft.draft_text).is_not(None), col(Draft.escalated).is_(False))
        .order_by(col(Draft.id))
    ).all()
    return [(d, c) for d, c in rows]


def _draft_facts(*, session: Session, run_id: int, judge_version: str) -> list[DraftFacts]:
    """Return the run's gradable drafts in id order (escalations and fallbacks have nothing to grade or judge)."""
    rows = [(d.id, c.case_id, c.category, c.golden) for d, c in gradable_drafts(session=session, run_id=run_id)]
    if not rows:
        raise PpiError(f"run: run {run_id} has no draft to grade")
    scores = judge_scores(session=session, run_id=run_id, judge_version=judge_version)
    missing = [d for d, *_ in rows if d not in scores]
    if missing:
        raise PpiError(
            f"judge_version: {len(missing)} of {len(rows)} drafts have no score from judge {judge_version!r} "
            f"(first: draft {missing[0]}); run the judge pass first"
        )
    case_ids = [c for _, c, _, _ in rows]
    regression = set(session.exec(select(RegressionCase.case_id).where(col(RegressionCase.case_id).in_(case_ids))).all())
    facts = []
    for draft_id, case_id, category, golden in rows:
        assert draft_id is not None
        s = scores[draft_id]
        stratum = category or "uncategorised"
        facts.append(
            DraftFacts(
                draft_id=draft_id,
                ticket=case_id,
                stratum=stratum,
                forced=stratum in FORCED_STRATA or bool(golden) or case_id in regression,
                judge_score=overall_score(s.factual_accuracy, s.citation_relevance, s.tone, s.completeness),
            )
        )
    return facts


def learn_error_model(*, session: Session, run_id: int) -> tuple[ErrorModel | None, list[int]]:
    """Return the error model from earlier runs' final grades beside their judge scores, and those runs' ids."""
    rows = session.exec(
        select(PpiJudgeScore, FinalGrade, EvalCase.category)
        .join(FinalGrade, col(FinalGrade.draft_id) == PpiJudgeScore.draft_id)
        .join(Draft, col(Draft.id) == PpiJudgeScore.draft_id)
        .join(EvalCase, col(EvalCase.id) == Draft.case_pk)
        .where(PpiJudgeScore.run_id != run_id)
        .order_by(col(PpiJudgeScore.id))
    ).all()
    examples = [
        GradedExample(
            stratum=category or "uncategorised",
            judge_score=overall_score(j.factual_accuracy, j.citation_relevance, j.tone, j.completeness),
            human_score=overall_score(f.factual_accuracy, f.citation_relevance, f.tone, f.completeness),
        )
        for j, f, category in rows
    ]
    return fit_error_model(examples), sorted({j.run_id for j, _, _ in rows})


def _refuse_if_graded(session: Session, run_id: int) -> None:
    graded = session.exec(
        select(func.count()).select_from(Grade).join(Draft, col(Draft.id) == Grade.draft_id).where(Draft.run_id == run_id)
    ).one()
    if graded:
        raise PpiError(
            f"run: {graded} grades already exist for this run; a sample must be drawn before anyone grades (docs/ppi.md)"
        )


@dataclass(frozen=True)
class SampleSummary:
    """What one sampling round stored."""

    run_id: int
    round: int
    drafts: int
    forced: int
    drawn: int
    expected: float
    seed: int
    error_model_id: int | None


def draw_sample(
    *,
    session: Session,
    run_id: int,
    budget: float,
    judge_version: str,
    seed: int | None = None,
    now: dt.datetime | None = None,
) -> SampleSummary:
    """Draw a run's human-grading sample before any grade: pi per draft, Bernoulli draws, stored append-only."""
    if session.get(Run, run_id) is None:
        raise PpiError(f"run: no run {run_id}")
    if session.exec(select(PpiDraw.id).where(PpiDraw.run_id == run_id)).first() is not None:
        raise PpiError("run: this run already has a sample; draw a further one to add grades")
    _refuse_if_graded(session, run_id)
    facts = _draft_facts(session=session, run_id=run_id, judge_version=judge_version)
    model, source_runs = learn_error_model(session=session, run_id=run_id)
    model_id = None
    if model is not None:
        stored = PpiErrorModel(params=model.as_json(), source_runs=source_runs, created_at=now or utcnow())
        session.add(stored)
        session.flush()
        model_id = stored.id
    weight = None if model is None else model.weights([f.stratum for f in facts], [f.judge_score for f in facts])
    forced = np.array([f.forced for f in facts])
    pi = inclusion_probabilities(forced=forced, weight=weight, budget=budget)
    return _store_round(
        session=session,
        run_id=run_id,
        facts=facts,
        round_no=1,
        pi=pi,
        previous=np.zeros(len(facts)),
        seed=_seed(seed),
        budget=budget,
        judge_version=judge_version,
        model_id=model_id,
        now=now,
    )


def draw_further_sample(
    *, session: Session, run_id: int, budget: float, seed: int | None = None, now: dt.datetime | None = None
) -> SampleSummary:
    """Draw another independent sample of a run (to settle an undecided gate), with the first round's frozen model.

    A draft is then graded when any round drew it; its probability becomes 1 - (1 - pi_before)(1 - pi_now).
    """
    rows = _latest_rows(session, run_id)
    if not rows:
        raise PpiError("run: this run has no sample yet; draw the first one")
    if (refusal := until_decided.new_probabilities_refusal(session=session, run_id=run_id)) is not None:
        raise PpiError(refusal)
    first = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id, PpiDraw.round == 1)).first()
    assert first is not None
    facts = _as_in_round_one(session, run_id, _draft_facts(session=session, run_id=run_id, judge_version=first.judge_version))
    model = None
    if first.error_model_id is not None:
        stored = session.get(PpiErrorModel, first.error_model_id)
        assert stored is not None
        model = ErrorModel.from_json(stored.params)
    weight = None if model is None else model.weights([f.stratum for f in facts], [f.judge_score for f in facts])
    forced = np.array([f.forced for f in facts])
    pi = inclusion_probabilities(forced=forced, weight=weight, budget=budget)
    previous = np.array([rows[f.draft_id].combined_pi for f in facts])
    round_no = max(r.round for r in rows.values()) + 1
    return _store_round(
        session=session,
        run_id=run_id,
        facts=facts,
        round_no=round_no,
        pi=pi,
        previous=previous,
        seed=_seed(seed),
        budget=budget,
        judge_version=first.judge_version,
        model_id=first.error_model_id,
        now=now,
    )


def _as_in_round_one(session: Session, run_id: int, facts: list[DraftFacts]) -> list[DraftFacts]:
    """Return the drafts with round one's stored stratum and forced flag (webapp.ppi.sampler.frozen_design).

    The regression suite and the case categories change after people read round one's grades (a
    graded draft is added to the suite); recomputing "forced" from them would change the design
    mid-sample, so a later round keeps round one's, as stored in its rows.
    """
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id, PpiDraw.round == 1)).all()
    stored = {r.draft_id: FrozenDesign(r.stratum, r.forced) for r in rows}
    try:
        designs = frozen_design(stored, [f.draft_id for f in facts])
    except KeyError as exc:
        raise PpiError(f"run: draft {exc.args[0]} was not in the run's first sample; draw a new sample for a changed run") from None
    return [replace(f, stratum=d.stratum, forced=d.forced) for f, d in zip(facts, designs, strict=True)]


def _seed(seed: int | None) -> int:
    if seed is None:
        return secrets.randbelow(SEED_LIMIT)
    if not 0 <= seed < SEED_LIMIT:
        raise PpiError(f"seed: must lie in 0..{SEED_LIMIT - 1}")
    return seed


def _store_round(
    *,
    session: Session,
    run_id: int,
    facts: list[DraftFacts],
    round_no: int,
    pi: np.ndarray,
    previous: np.ndarray,
    seed: int,
    budget: float,
    judge_version: str,
    model_id: int | None,
    now: dt.datetime | None,
) -> SampleSummary:
    drawn = draw(pi, seed)
    combined = combined_pi(previous, pi)
    stamp = now or utcnow()
    for k, f in enumerate(facts):
        session.add(
            PpiDraw(
                run_id=run_id,
                draft_id=f.draft_id,
                round=round_no,
                stratum=f.stratum,
                forced=f.forced,
                judge_version=judge_version,
                judge_score=f.judge_score,
                pi=float(pi[k]),
                combined_pi=float(combined[k]),
                drawn=bool(drawn[k]),
                seed=seed,
                budget=float(budget),
                error_model_id=model_id,
                created_at=stamp,
            )
        )
    session.flush()
    record_fact(session, "sample_drawn", run_id=run_id)  # its figures are computed again (webapp/ppi/reactions.py)
    # The drawn drafts go to the grading queue in a random order (seeded from the same stored seed).
    chosen = [f.draft_id for f, d in zip(facts, drawn, strict=True) if d]
    order = np.random.default_rng([seed, round_no]).permutation(len(chosen))
    add_to_plan(session=session, run_id=run_id, draft_ids=[chosen[k] for k in order])
    until_decided.sync_queue_order(session=session, run_id=run_id)
    return SampleSummary(
        run_id=run_id,
        round=round_no,
        drafts=len(facts),
        forced=int(sum(f.forced for f in facts)),
        drawn=int(drawn.sum()),
        expected=float(pi.sum()),
        seed=seed,
        error_model_id=model_id,
    )


def _latest_rows(session: Session, run_id: int) -> dict[int, PpiDraw]:
    """Return each draft's row of the latest round (its combined pi is the one the estimator uses)."""
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.round))).all()
    return {r.draft_id: r for r in rows}


@dataclass(frozen=True)
class DraftSample:
    """A draft's standing in a run's sample: the probability of having been drawn so far, and whether it was."""

    draft_id: int
    stratum: str
    forced: bool
    judge_score: float
    pi: float
    drawn: bool


def run_sample(*, session: Session, run_id: int) -> list[DraftSample] | None:
    """Return the run's sample over all rounds (drawn = any round drew it), or None when it has none."""
    rows = session.exec(select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.round))).all()
    if not rows:
        return None
    latest: dict[int, PpiDraw] = {}
    drawn: dict[int, bool] = {}
    for r in rows:
        latest[r.draft_id] = r
        drawn[r.draft_id] = drawn.get(r.draft_id, False) or r.drawn
    return [
        DraftSample(d, r.stratum, r.forced, r.judge_score, r.combined_pi, drawn[d]) for d, r in sorted(latest.items())
    ]


def drawn_draft_ids(*, session: Session, run_id: int) -> set[int] | None:
    """Return the drafts people grade in a run with a sample, or None when the run has no sample (grade all)."""
    sample = run_sample(session=session, run_id=run_id)
    return None if sample is None else {s.draft_id for s in sample if s.drawn}


def redraw_from_rows(*, session: Session, run_id: int) -> dict[int, bool]:
    """Redraw every round from its stored pi and seed and return drawn-in-any-round per draft (an audit check)."""
    rows = session.exec(
        select(PpiDraw).where(PpiDraw.run_id == run_id).order_by(col(PpiDraw.round), col(PpiDraw.draft_id))
    ).all()
    by_round: dict[int, list[PpiDraw]] = {}
    for r in rows:
        by_round.setdefault(r.round, []).append(r)
    out: dict[int, bool] = {}
    for round_rows in by_round.values():
        again = draw([r.pi for r in round_rows], round_rows[0].seed)
        for r, d in zip(round_rows, again, strict=True):
            out[r.draft_id] = out.get(r.draft_id, False) or bool(d)
    return out
