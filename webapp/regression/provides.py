"""Regression's answers to the hooks of the checks below it (webapp/core/hooks.py): the CI gate's reads."""

from __future__ import annotations

from sqlmodel import Session

from webapp.checks import ci_gate
from webapp.checks import hooks as checks_hooks
from webapp.checks import service as checks_service
from webapp.core.blind import ALL_SIGNALS, SignalsView
from webapp.core.spec import EvalSpec
from webapp.grading import status as grading_status
from webapp.regression import drop as regression_drop
from webapp.runs.models import Run


def baseline_of(*, session: Session, run_id: int) -> Run | None:
    """Return the run the drop alert measures a run from (marked baseline, else the previous checked run), or None."""
    baseline = regression_drop.alert_baseline(session=session, run_id=run_id)
    return baseline.run if baseline is not None else None


def ci_verdict(
    *, session: Session, spec: EvalSpec, summary: checks_service.RunSummary, signals: SignalsView = ALL_SIGNALS
) -> ci_gate.CiVerdict:
    """Return the CI verdict on a run (webapp.checks.ci_gate): criterion 1 whole, golden and safety, the drop alert."""
    finals = grading_status.final_grades(session=session, run_id=summary.run_id)
    factual = {draft_id: view.factual_accuracy for draft_id, view in finals.items()}
    return ci_gate.ci_verdict(
        summary=summary, spec=spec, factual=factual, signals=signals,
        eval_set=checks_service.eval_set_facts(session=session, spec=spec, dataset_id=summary.dataset_id),
        drop=regression_drop.drop_reading(session=session, spec=spec, run_id=summary.run_id, summary=summary),
    )


PROVIDES = (
    checks_hooks.ci_verdict.by(ci_verdict),
    checks_hooks.baseline_of.by(baseline_of),
)
