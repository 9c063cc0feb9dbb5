"""The run report as the page and the API show it: figures in their units, gate calls, judge health."""

from __future__ import annotations

from typing import Any

from webapp.core.spec import EvalSpec
from webapp.ppi.estimator import Estimand, Estimate
from webapp.ppi.report import FIGURES, GateCall, RunReport, gate_call

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


def _estimate_view(e: Estimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "estimate": e.estimate,
        "low": e.low,
        "high": e.high,
        "se": e.se,
        "df": e.df,
        "confidence": e.confidence,
        "judge_alone": e.judge_alone,
        "bias": e.bias,
        "lambdas": list(e.lambdas),
        "human_grades": e.n_labels,
        "drafts": e.n_drafts,
        "worth_human_grades": e.effective_labels,
        "estimand": e.estimand,
        "about": estimand_label(e.estimand, e.n_drafts),
    }


def _gate_view(call: GateCall, threshold: float) -> dict[str, Any]:
    return {"threshold": threshold, "verdict": call.verdict, "more_grades": call.more_grades, "provisional": call.provisional}


def report_view(report: RunReport, spec: EvalSpec) -> dict[str, Any]:
    """Return the report as plain data (the API answer; the page renders the same)."""
    figures = []
    for key in FIGURES:
        fig = report.figures[key]
        threshold = gate_threshold(spec, key)
        gate = None
        if threshold is not None:
            gate = _gate_view(gate_call(fig.estimate, threshold, pending=report.pending, undrawn=report.drafts - report.drawn), threshold)
        figures.append(
            {
                "key": key,
                "title": TITLES[key],
                "unit": "share" if key in ("factual_accuracy", "pass_rate") else "grade",
                "interval": _estimate_view(fig.estimate),
                "agreement": fig.agreement,
                "judge_minus_human": fig.mean_gap,
                # the interval's "bias removed" equals judge_minus_human when every lambda is 1 (report.judge_gap)
                "bias_matches_gap": fig.estimate is not None and all(lam == 1.0 for lam in fig.estimate.lambdas),
                "low_lambda_warning": fig.low_lambda,
                "gate": gate,
            }
        )
    return {
        "run_id": report.run_id,
        "drafts": report.drafts,
        "drawn": report.drawn,
        "graded": report.graded,
        "pending": report.pending,
        "rounds": report.rounds,
        "judge_version": report.judge_version,
        "seed": report.seed,
        "figures": figures,
    }
