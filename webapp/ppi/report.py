"""A run's rubric figures with 95% intervals, from the stored judge scores, draws and final grades.

Everything is recomputed from stored rows: the judge's scores (ppi_judge_score), each draft's
combined pi and draw (ppi_draw), the final human grades (final_grade) and the first round's seed
(which also seeds the cross-fitting folds), so the page, the API and anyone re-running this get
the same interval.

Decisions:
- Labelled = drawn drafts with a final grade. Drawn drafts still waiting for their grades are
  left out of the estimate (and counted as "pending"): the figures are provisional until the
  sample is fully graded (the page says so next to each verdict), and the gate's human-grading
  criterion stays incomplete while any drawn draft is pending. "Undecided" means only that the
  interval straddles the threshold.
- Tickets: drafts of the same case (several samples) form one cluster.
- Every pass / fail / undecided call (the gate, the page, the API, a production week's alert) is
  `decide` (webapp/ppi/anytime.py, re-exported here): it reads the confidence sequence about the
  run's own mean, valid however often the figure is looked at (issue 43); its "about K more" is
  the further grades the sequence needs, beyond those already drawn. A guide, not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from webapp.core.db import stored_id, table_of
from webapp.core.spec import EvalSpec
from webapp.datasets.models import EvalCase
from webapp.grading.models import FinalGrade
from webapp.ppi.anytime import GateCall as GateCall  # the public call (issue 43)
from webapp.ppi.anytime import decide as decide
from webapp.ppi.estimator import (
    LOW_LAMBDA_WARNING,
    Estimand,
    Estimate,
    EstimatorError,
    Lambda,
    Sample,
    estimate_difference,
    estimate_mean,
    make_sample,
)
from webapp.ppi.models import PpiDraw, PpiJudgeScore, PpiProductionWeek
from webapp.ppi.signals import (
    FIGURE_RANGE,
    DraftSignals,
    SignalMatrix,
    Source,
    call_to_call_share,
    call_values,
    choose,
    error_correlation,
    figure_values,
    parse_signals,
    signal_matrix,
    within_range,
)
from webapp.regression.alerts import PassRateDifference
from webapp.regression.service import baseline_for
from webapp.runs.models import Draft, Run

FIGURES: tuple[str, ...] = ("factual_accuracy", "citation_relevance", "tone", "completeness", "pass_rate")


@dataclass(frozen=True)
class Figure:
    """One rubric figure of a run: the PPI estimate the gate uses, the two it was chosen from, and what the page says about it."""

    key: str
    estimate: Estimate | None  # what the gate uses: `learned` when it pays, else `single` (signals.choose); None without grades
    agreement: float | None  # judge vs human on the labelled drafts: share equal (0/1) or within 1 point
    mean_gap: float | None  # judge minus human on the labelled drafts, 1/pi-weighted (judge_gap)
    single: Estimate | None = None  # from the first call's score alone (today's estimate)
    learned: Estimate | None = None  # from the learned predictor on the signal matrix; None without signals
    uses_learned: bool = False
    source: Source = "single"  # which estimate `estimate` is: learned, single score, or the human grades alone (signals.choose)
    note: str | None = None  # "the extra signals do not pay here (...)" when learned exists but does not pay
    columns: tuple[str, ...] = ()  # the signal matrix's columns (signals.Column)
    call_share: float | None = None  # share of the judge's error that changes from call to call
    error_corr: float | None = None  # correlation of the two judges' errors against the human grade

    @property
    def low_lambda(self) -> bool:
        """Tell whether the judge is trusted little (lambda < 0.3): it barely helps this figure."""
        return self.estimate is not None and min(self.estimate.lambdas) < LOW_LAMBDA_WARNING


@dataclass(frozen=True)
class JudgeCost:
    """What the judge cost per draft: calls (both judges, failed ones included) and dollars (None without prices)."""

    calls_per_draft: float
    usd_per_draft: float | None


@dataclass(frozen=True)
class RunReport:
    """A run's PPI figures, and the sample's counts."""

    run_id: int
    drafts: int
    drawn: int
    graded: int
    pending: int
    rounds: int
    judge_version: str
    seed: int
    figures: dict[str, Figure]
    cost: JudgeCost | None = None
    week: str | None = None  # the production week whose run this is (its figures read WEEK_ESTIMAND)


@dataclass(frozen=True)
class StoredSample:
    """One run's sample as stored: per gradable draft (id order) its judge and final grades, pi, draw and ticket."""

    ids: list[int]
    judge_rows: list[tuple[str, float, float, float]]
    human_rows: list[tuple[str, float, float, float]]  # ("fail", 0, 0, 0) where no final grade (never read)
    drawn: np.ndarray  # any round drew it
    labelled: np.ndarray  # drawn and finally graded
    pi: np.ndarray  # combined over the rounds
    tickets: np.ndarray  # the case id of each draft
    seed: int  # the first round's (it also seeds the cross-fitting folds)
    judge_version: str
    rounds: int
    signals: tuple[DraftSignals | None, ...] = ()  # per draft (signals.parse_signals); () when not read
    intents: np.ndarray | None = None  # the case's intent per draft ("" without one): the predictor's groups
    calls: np.ndarray | None = None  # judge calls per draft (column `calls`)
    costs: tuple[float | None, ...] = ()  # dollars per draft (column `cost_usd`)

    @property
    def n_drawn(self) -> int:
        """Return how many drafts any round drew."""
        return int(self.drawn.sum())

    @property
    def graded(self) -> int:
        """Return how many drawn drafts have their final grade."""
        return int(self.labelled.sum())

    @property
    def pending(self) -> int:
        """Return how many drawn drafts still wait for their final grade."""
        return self.n_drawn - self.graded

    def cost(self) -> JudgeCost | None:
        """Return the judge's cost per draft (dollars only when every draft has its price)."""
        if self.calls is None or not self.ids:
            return None
        dollars = None if any(c is None for c in self.costs) or not self.costs else sum(c or 0.0 for c in self.costs) / len(self.ids)
        return JudgeCost(calls_per_draft=float(self.calls.mean()), usd_per_draft=dollars)


_JudgeRow = tuple[tuple[str, float, float, float], DraftSignals | None, int, float | None]


def _judge_rows(session: Session, run_id: int, judge_version: str) -> dict[int, _JudgeRow]:
    """Return per draft the judge's first-call row, its parsed signals, its calls and its cost."""
    j = table_of(PpiJudgeScore).c
    rows = session.execute(
        sa_select(j.draft_id, j.factual_accuracy, j.citation_relevance, j.tone, j.completeness, j.signals, j.calls, j.cost_usd).where(
            j.run_id == run_id, j.judge_version == judge_version
        )
    )
    return {
        int(r[0]): ((str(r[1]), float(r[2]), float(r[3]), float(r[4])), parse_signals(r[5]), int(r[6]), None if r[7] is None else float(r[7]))
        for r in rows
    }


def stored_sample(*, session: Session, run_id: int) -> StoredSample | None:
    """Return the run's sample read from the stored rows, or None when the run has none.

    Plain columns, no ORM objects: /metrics reads one sample per production week on every visit.
    """
    d = table_of(PpiDraw).c
    draws = session.execute(
        sa_select(d.draft_id, d.round, d.drawn, d.combined_pi, d.seed, d.judge_version)
        .where(d.run_id == run_id)
        .order_by(d.round, d.draft_id)
    ).all()
    if not draws:
        return None
    _, _, _, _, seed, judge_version = draws[0]
    latest_pi: dict[int, float] = {}
    drawn: dict[int, bool] = {}
    for draft_id, _, was_drawn, combined_pi, _, _ in draws:
        latest_pi[draft_id] = float(combined_pi)
        drawn[draft_id] = drawn.get(draft_id, False) or bool(was_drawn)
    ids = sorted(latest_pi)
    f = table_of(FinalGrade).c
    judge = _judge_rows(session, run_id, str(judge_version))
    run_drafts = select(Draft.id).where(Draft.run_id == run_id)
    finals = {
        int(r[0]): (str(r[1]), float(r[2]), float(r[3]), float(r[4]))
        for r in session.execute(
            sa_select(f.draft_id, f.factual_accuracy, f.citation_relevance, f.tone, f.completeness).where(f.draft_id.in_(run_drafts))
        )
    }
    cases = {
        stored_id(i): (str(case), intent or "")
        for i, case, intent in session.exec(
            select(Draft.id, EvalCase.case_id, EvalCase.intent).join(EvalCase, col(EvalCase.id) == Draft.case_pk).where(Draft.run_id == run_id)
        ).all()
    }
    return StoredSample(
        ids=ids,
        judge_rows=[judge[d][0] for d in ids],
        human_rows=[finals.get(d, ("fail", 0.0, 0.0, 0.0)) for d in ids],
        drawn=np.array([drawn[d] for d in ids]),
        labelled=np.array([drawn[d] and d in finals for d in ids]),
        pi=np.array([latest_pi[d] for d in ids]),
        tickets=np.array([cases[d][0] for d in ids]),
        seed=int(seed),
        judge_version=str(judge_version),
        rounds=max(int(r[1]) for r in draws),
        signals=tuple(judge[d][1] for d in ids),
        intents=np.array([cases[d][1] for d in ids]),
        calls=np.array([judge[d][2] for d in ids], dtype=np.int64),
        costs=tuple(judge[d][3] for d in ids),
    )


def _bounded(sample: Sample, stored: StoredSample, key: str, estimand: Estimand, lam: Lambda = "crossfit") -> Estimate | None:
    """Return the sample's estimate cut to the figure's range, or None when the estimator cannot give one."""
    try:
        return within_range(estimate_mean(sample, seed=stored.seed, estimand=estimand, lam=lam), *FIGURE_RANGE[key])
    except EstimatorError:
        return None


def learned_estimate(
    spec: EvalSpec, stored: StoredSample, key: str, *, estimand: Estimand = "run"
) -> tuple[Estimate | None, SignalMatrix | None]:
    """Return the learned-predictor estimate of a figure from its signal matrix (groups: the case's intent), and the matrix.

    (None, None) when the run has no learned predictor (signals.signal_matrix).
    """
    matrix = signal_matrix(spec, key, stored.signals) if stored.signals else None
    if matrix is None:
        return None, None
    labelled = stored.labelled
    y = np.where(labelled, figure_values(spec, key, stored.human_rows), np.nan)
    sample = make_sample(judge=matrix.values, human=y, drawn=labelled, pi=stored.pi, cluster=stored.tickets, groups=stored.intents)
    return _bounded(sample, stored, key, estimand), matrix


def signal_health(spec: EvalSpec, stored: StoredSample, key: str) -> tuple[float | None, float | None]:
    """Return (share of judge error changing call to call, the two judges' error correlation) on the graded drafts."""
    graded = [i for i in np.flatnonzero(stored.labelled) if stored.signals and stored.signals[i] is not None]
    if not graded:
        return None, None
    sigs = [s for s in (stored.signals[i] for i in graded) if s is not None]
    human = figure_values(spec, key, [stored.human_rows[i] for i in graded])
    share = call_to_call_share(call_values(spec, key, sigs), human)
    with_second = [k for k, s in enumerate(sigs) if s.second is not None]
    first = figure_values(spec, key, [sigs[k].calls[0] for k in with_second])
    second = figure_values(spec, key, [r for r in (sigs[k].second for k in with_second) if r is not None])
    return share, error_correlation(first, second, human[with_second])


def agreement_of(spec: EvalSpec, stored: StoredSample, key: str) -> float | None:
    """Return the share of graded drafts on which the judge's first call and people agree (equal 0/1, or within 1 point)."""
    labelled = stored.labelled
    if labelled.sum() < 2:
        return None
    gap = figure_values(spec, key, stored.judge_rows)[labelled] - figure_values(spec, key, stored.human_rows)[labelled]
    return float(np.mean(np.abs(gap) < (0.5 if key in ("factual_accuracy", "pass_rate") else 1.5)))


def figure_of(spec: EvalSpec, stored: StoredSample, key: str, *, estimand: Estimand = "run") -> Figure:
    """Return one figure of a stored sample: the single-score and learned estimates (cut to the figure's range), the one the gate uses, agreement and judge gap.

    The estimand is the run's own drafts (issue 34) unless told otherwise (webapp/ppi/estimator.py).
    """
    f = figure_values(spec, key, stored.judge_rows)
    labelled = stored.labelled
    y = np.where(labelled, figure_values(spec, key, stored.human_rows), np.nan)
    if labelled.sum() < 2:
        return Figure(key=key, estimate=None, agreement=None, mean_gap=None)
    one = make_sample(judge=f, human=y, drawn=labelled, pi=stored.pi, cluster=stored.tickets)
    single = _bounded(one, stored, key, estimand)
    mean_gap = judge_gap(make_sample(judge=f, human=y, drawn=labelled, pi=stored.pi), seed=stored.seed, estimand=estimand)
    learned, matrix = learned_estimate(spec, stored, key, estimand=estimand)
    choice = choose(single, learned, _bounded(one, stored, key, estimand, lam=0.0))  # lam 0: the human grades alone
    share, corr = signal_health(spec, stored, key)
    return Figure(
        key=key, estimate=choice.estimate, agreement=agreement_of(spec, stored, key), mean_gap=mean_gap,
        single=single, learned=learned, uses_learned=choice.uses_learned, note=choice.note, source=choice.source,
        columns=() if matrix is None else matrix.columns, call_share=share, error_corr=corr,
    )


def judge_gap(sample: Sample, *, seed: int = 0, estimand: Estimand = "run") -> float:
    """Return the judge's bias over the run's drafts, estimated from the graded ones: the judge-alone mean minus the lambda = 1 estimate.

    Decision (the two "bias" figures of a criterion): the judge-health table shows the bias the
    estimate removes when it keeps the judge's scores whole (lambda = 1), computed by the same
    estimator and estimand as the interval table's "bias removed" (judge alone minus the
    estimate), so both are in the same units and equal whenever lambda is 1. With lambda below 1
    the estimate keeps only lambda of the judge's scores and the page says why they differ. A plain
    mean of the graded drafts would over-count the drafts the sampler drew often (forced drafts,
    pi = 1) and leave out what the graded drafts say of the undrawn ones.
    """
    return estimate_mean(sample, lam=1.0, seed=seed, estimand=estimand).bias


WEEK_ESTIMAND: Estimand = "superpopulation"
"""What a production week's figures are about, on /metrics and on its run's page alike. Decision (issue 34): the
superpopulation, unlike a run page's figures. The weekly figure watches the assistant over time (is quality
drifting?), a question about the drafts it writes, not only the ones of one week; and a capped week's run is a
uniform subsample of the week, so its drafts are not the week's anyway. Read this way a week of four fully graded
drafts at 3.25 is not, on its own, proof that quality fell below 3.5."""


def run_report(*, session: Session, spec: EvalSpec, run_id: int) -> RunReport | None:
    """Return the run's figures with intervals, or None when the run has no sample.

    A production week's run reads its figures as /metrics does (`WEEK_ESTIMAND`, the same
    `figure_of`), so a week and criterion has one figure on every page (issue 41 item 3).
    """
    stored = stored_sample(session=session, run_id=run_id)
    if stored is None:
        return None
    week = session.exec(select(PpiProductionWeek.week).where(PpiProductionWeek.run_id == run_id)).first()
    estimand: Estimand = WEEK_ESTIMAND if week is not None else "run"
    return RunReport(
        run_id=run_id,
        drafts=len(stored.ids),
        drawn=stored.n_drawn,
        graded=stored.graded,
        pending=stored.pending,
        rounds=stored.rounds,
        judge_version=stored.judge_version,
        seed=stored.seed,
        figures={key: figure_of(spec, stored, key, estimand=estimand) for key in FIGURES},
        cost=stored.cost(),
        week=week,
    )


# --- the regression alert: a run's pass rate against its baseline's ---------------------------------------


def pass_rate_difference(
    *, session: Session, spec: EvalSpec, run_id: int, baseline_id: int
) -> PassRateDifference | None:
    """Return the run's pass rate minus its baseline's with the 95% interval, or None when either has no sample.

    Decisions (docs/ppi.md, "Difference between two runs"):
    - Only the cases both runs drafted (gradable drafts, by case id) are compared: restricting a
      sample to a set of cases keeps each draft's pi, so the estimate stays unbiased for those
      cases. When both runs ran the same cases, each side equals its run page's pass rate.
    - Drafts of one case are one ticket in both runs (`estimate_difference` pairs them), so the
      cases' shared difficulty cancels out of the interval.
    - Each run's cross-fitting folds are seeded with its own stored seed, as on its run page.
    - The interval is cut to [-100, +100] points (what a difference of two shares can be); the
      coverage is unchanged.
    - No case in common: None (the checks' rule applies, as for runs without a sample).
    - Estimand (issue 34): the superpopulation, unlike the run page's figures. A drop between two
      runs asks whether the change makes the assistant worse (would it drop again on new drafts of
      these cases), not what these two sets of drafts scored: two fully graded runs differ by
      chance alone, and reading that difference as exact would confirm drops that are noise.
    """
    a = stored_sample(session=session, run_id=run_id)
    b = stored_sample(session=session, run_id=baseline_id)
    run, baseline = session.get(Run, run_id), session.get(Run, baseline_id)
    if a is None or b is None or run is None or baseline is None:
        return None
    shared = np.intersect1d(a.tickets, b.tickets)
    if shared.shape[0] == 0:
        return None
    in_a, in_b = np.isin(a.tickets, shared), np.isin(b.tickets, shared)
    labels_a, labels_b = int((a.labelled & in_a).sum()), int((b.labelled & in_b).sum())
    pending = int((a.drawn & ~a.labelled & in_a).sum() + (b.drawn & ~b.labelled & in_b).sum())
    estimate = low = high = None
    if labels_a >= 2 and labels_b >= 2:
        try:
            diff = estimate_difference(
                _pass_sample(spec, a, in_a),
                _pass_sample(spec, b, in_b),
                a_cluster_keys=a.tickets[in_a],
                b_cluster_keys=b.tickets[in_b],
                seed=a.seed,
                b_seed=b.seed,
                estimand="superpopulation",
            )
            estimate, low, high = diff.estimate, max(diff.low, -1.0), min(diff.high, 1.0)
        except EstimatorError:
            estimate = low = high = None
    return PassRateDifference(
        run_id=run_id,
        run_name=run.name,
        baseline_id=baseline_id,
        baseline_name=baseline.name,
        estimate=estimate,
        low=low,
        high=high,
        threshold=spec.regression.alert_pass_rate_drop,
        cases=int(shared.shape[0]),
        graded=labels_a,
        baseline_graded=labels_b,
        pending=pending,
    )


def _pass_sample(spec: EvalSpec, stored: StoredSample, keep: np.ndarray) -> Sample:
    """Return the pass-rate sample (judge's and humans' all-four-criteria pass) of the drafts in `keep`."""
    judge_rows = [r for r, k in zip(stored.judge_rows, keep, strict=True) if k]
    human_rows = [r for r, k in zip(stored.human_rows, keep, strict=True) if k]
    labelled = stored.labelled[keep]
    return make_sample(
        judge=figure_values(spec, "pass_rate", judge_rows),
        human=np.where(labelled, figure_values(spec, "pass_rate", human_rows), np.nan),
        drawn=labelled,
        pi=stored.pi[keep],
        cluster=stored.tickets[keep],
    )


def baseline_differences(*, session: Session, spec: EvalSpec, baseline_id: int | None = None) -> list[PassRateDifference]:
    """Return the sampled pass-rate difference of every run with a sample whose baseline has one, newest run first.

    With `baseline_id`, only the runs measured against that baseline (their differences alone are computed).
    """
    run_ids = session.exec(
        select(Run.id)
        .where(col(Run.id).in_(select(PpiDraw.run_id).distinct()))
        .order_by(col(Run.created_at).desc(), col(Run.id).desc())
    ).all()
    out: list[PassRateDifference] = []
    for run_id in run_ids:
        assert run_id is not None
        baseline = baseline_for(session=session, run_id=run_id)
        if baseline is None or baseline.id == run_id or (baseline_id is not None and baseline.id != baseline_id):
            continue
        reading = pass_rate_difference(session=session, spec=spec, run_id=run_id, baseline_id=stored_id(baseline.id))
        if reading is not None:
            out.append(reading)
    return out
