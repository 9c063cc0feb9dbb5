"""The run report as the page and the API show it: figures in their units, gate calls, judge health."""

from __future__ import annotations

from webapp.core.spec import EvalSpec
from webapp.ppi.estimator import Estimand, Estimate
from webapp.ppi.report import FIGURES, Figure, GateCall, RunReport, decide
from webapp.ppi.schemas import EstimatePublic, FigurePublic, GatePublic, JudgeCostPublic, RunReportPublic
from webapp.ppi.signals import FIGURE_RANGE

TITLES = {
    "factual_accuracy": "Factual accuracy (pass share)",
    "citation_relevance": "Citation relevance",
    "tone": "Tone",
    "completeness": "Completeness",
    "pass_rate": "Pass rate (all four criteria)",
}


def gate_threshold(spec: EvalSpec, key: str) -> float | None:
    """Return the pilot gate's human-grading threshold on this figure's scale (None: the gate has none for it)."""
    g = spec.gates.pilot
    if key == "factual_accuracy":
        # the gate scores factual pass as factual_pass_score and fail as factual_fail_score
        return (g.human_mean_above - g.factual_fail_score) / (g.factual_pass_score - g.factual_fail_score)
    if key in ("citation_relevance", "tone", "completeness"):
        return g.human_mean_above
    return None


def estimand_label(estimand: Estimand, drafts: int) -> str:
    """Return what an interval is about, as the pages say it (issue 34)."""
    if estimand == "run":
        return f"about this run's {drafts} draft{'' if drafts == 1 else 's'}"
    return "about drafts like these (superpopulation)"


def estimate_public(e: Estimate | None) -> EstimatePublic | None:
    """Return an estimate as the API and the page give it (None stays None)."""
    if e is None:
        return None
    return EstimatePublic(
        estimate=e.estimate, low=e.low, high=e.high, se=e.se, df=e.df, confidence=e.confidence, judge_alone=e.judge_alone,
        bias=e.bias, lambdas=list(e.lambdas), human_grades=e.n_labels, drafts=e.n_drafts,
        worth_human_grades=e.effective_labels, estimand=e.estimand, about=estimand_label(e.estimand, e.n_drafts),
        predictor=e.predictor, r_squared=e.r_squared,
    )


def gate_public(call: GateCall, threshold: float) -> GatePublic:
    """Return the gate's reading of a figure."""
    return GatePublic(
        threshold=threshold, verdict=call.verdict, more_grades=call.more_grades, provisional=call.provisional,
        sequence_low=call.low, sequence_high=call.high, grades=call.grades,
    )


def figure_public(report: RunReport, fig: Figure, spec: EvalSpec, *, in_draw_order: bool = False) -> FigurePublic:
    """Return one figure as the API and the page give it (`in_draw_order`: graded until decided, so not provisional while drafts wait)."""
    threshold = gate_threshold(spec, fig.key)
    gate = None
    if threshold is not None:
        call = decide(fig.estimate, threshold, pending=report.pending, undrawn=report.drafts - report.drawn,
                      value_range=FIGURE_RANGE[fig.key], in_draw_order=in_draw_order)
        gate = gate_public(call, threshold)
    return FigurePublic(
        key=fig.key,
        title=TITLES[fig.key],
        unit="share" if fig.key in ("factual_accuracy", "pass_rate") else "grade",
        interval=estimate_public(fig.estimate),
        agreement=fig.agreement,
        judge_minus_human=fig.mean_gap,
        # the interval's "bias removed" equals judge_minus_human when every lambda is 1 (report.judge_gap) and the
        # estimate is the single score's (the learned predictor removes its own predictions' bias, not the judge's)
        bias_matches_gap=fig.estimate is not None and not fig.uses_learned and all(lam == 1.0 for lam in fig.estimate.lambdas),
        low_lambda_warning=fig.low_lambda,
        gate=gate,
        single=estimate_public(fig.single),
        learned=estimate_public(fig.learned),
        uses_learned=fig.uses_learned,
        source=fig.source,
        signals_note=fig.note,
        signal_columns=list(fig.columns),
        call_to_call_share=fig.call_share,
        judges_error_correlation=fig.error_corr,
    )


def report_public(report: RunReport, spec: EvalSpec, *, in_draw_order: bool = False) -> RunReportPublic:
    """Return the report as the API answers it (the page renders the same model); `in_draw_order`: the run is graded until decided."""
    cost = report.cost
    return RunReportPublic(
        run_id=report.run_id,
        drafts=report.drafts,
        drawn=report.drawn,
        graded=report.graded,
        pending=report.pending,
        rounds=report.rounds,
        judge_version=report.judge_version,
        seed=report.seed,
        figures=[figure_public(report, report.figures[key], spec, in_draw_order=in_draw_order) for key in FIGURES],
        judge_cost=None if cost is None else JudgeCostPublic(calls_per_draft=cost.calls_per_draft, usd_per_draft=cost.usd_per_draft),
        week=report.week,
    )
